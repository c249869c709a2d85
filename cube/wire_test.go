package cube

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestExitCodeOf(t *testing.T) {
	three, minusOne, zero := 3, -1, 0
	for _, tc := range []struct {
		status string
		code   *int
		want   int
	}{
		{"exit status 0", nil, 0},
		{"exit status 3", &three, 3},
		{"exit status 3", nil, 3}, // status wins when the field is missing
		{"signal: killed", &minusOne, 137},
		{"signal: terminated", &minusOne, 143},
		{"signal: segmentation fault (core dumped)", &minusOne, 139},
		{"signal: interrupt", nil, 130},
		{"", &three, 3},
		{"", nil, 0},
		{"", &zero, 0},
		{"weird", &minusOne, -1},
	} {
		if got := exitCodeOf(tc.status, tc.code); got != tc.want {
			t.Errorf("exitCodeOf(%q) = %d, want %d", tc.status, got, tc.want)
		}
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	payload := []byte(`{"process":{"cmd":"ls"}}`)
	frame := EncodeEnvelope(0, payload)
	if !bytes.Equal(frame[:5], []byte{0, 0, 0, 0, byte(len(payload))}) {
		t.Fatalf("header = % x", frame[:5])
	}
	flags, got, err := readEnvelope(bytes.NewReader(append(frame, EncodeEnvelope(flagEndStream, []byte("{}"))...)))
	if err != nil || flags != 0 || !bytes.Equal(got, payload) {
		t.Fatalf("read = %d %q %v", flags, got, err)
	}
	if _, _, err := readEnvelope(bytes.NewReader(frame[:7])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated envelope: %v", err)
	}
	huge := []byte{0, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := readEnvelope(bytes.NewReader(huge)); err == nil {
		t.Error("4 GiB envelope accepted")
	}
}

func TestMetadataQuery(t *testing.T) {
	q := EncodeMetadataQuery(map[string]string{"k": "v", "k2": "v2"})
	if got := q.Encode(); got != "metadata=k%3Dv%26k2%3Dv2" {
		t.Errorf("encoded = %s", got)
	}
	if EncodeMetadataQuery(nil) != nil {
		t.Error("empty filter encoded")
	}
}

func TestParseAPIError(t *testing.T) {
	resp := func(status int, retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: status, Header: h}
	}
	e := parseAPIError("op", resp(503, "2"), []byte(`{"code":503,"message":"sandbox is pausing"}`))
	if e.Code != 503 || e.Message != "sandbox is pausing" || e.RetryAfter != 2*time.Second || !errors.Is(e, ErrUnavailable) {
		t.Errorf("503 = %+v", e)
	}
	e = parseAPIError("op", resp(404, ""), []byte(`{"code":"not_found","message":"no such process"}`))
	if e.Code != 0 || e.Message != "not_found: no such process" || !errors.Is(e, ErrNotFound) {
		t.Errorf("connect error = %+v", e)
	}
	e = parseAPIError("op", resp(422, ""), []byte("Failed to deserialize\n"))
	if e.Message != "Failed to deserialize" || errors.Is(e, ErrNotFound) {
		t.Errorf("422 = %+v", e)
	}
	date := time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)
	if d := parseRetryAfter(date); d < time.Second || d > 3*time.Second {
		t.Errorf("Retry-After date = %v", d)
	}
	if d := parseRetryAfter("-4"); d != 0 {
		t.Errorf("negative Retry-After = %v", d)
	}
}

func TestBackoffBounds(t *testing.T) {
	c := &Client{retry: RetryPolicy{Max: 10, Base: 100 * time.Millisecond, MaxDelay: time.Second}}
	for attempt := range 8 {
		want := min(100*time.Millisecond<<attempt, time.Second)
		for range 50 {
			if d := c.backoff(attempt); d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestRetryClasses(t *testing.T) {
	c := &Client{retry: RetryPolicy{Max: 3, Base: time.Millisecond, MaxDelay: time.Millisecond}}
	api := func(status int, ra time.Duration) error { return &APIError{Status: status, RetryAfter: ra} }
	for _, tc := range []struct {
		class retryClass
		err   error
		retry bool
	}{
		{retrySafe, api(500, 0), true},
		{retrySafe, api(404, 0), false},
		{retrySafe, api(409, 0), false},
		{retrySafe, &TransportError{Sent: true}, true},
		{retryUnsent, api(500, 0), false},
		{retryUnsent, api(503, 0), false},
		{retryUnsent, api(503, time.Second), true},
		{retryUnsent, api(429, 0), true},
		{retryUnsent, api(408, 0), false},
		{retryUnsent, api(409, 0), false},
		{retryUnsent, &TransportError{Sent: false}, true},
		{retryUnsent, &TransportError{Sent: true}, false},
		{retrySnapshot, api(409, 0), true},
		{retrySnapshot, api(500, 0), false},
	} {
		if _, got := c.shouldRetry(tc.class, 0, tc.err); got != tc.retry {
			t.Errorf("class %d, %v: retry = %v, want %v", tc.class, tc.err, got, tc.retry)
		}
	}
	if d, ok := c.shouldRetry(retryUnsent, 0, api(503, 2*time.Second)); !ok || d != 2*time.Second {
		t.Errorf("Retry-After not used as the delay: %v", d)
	}
	if _, ok := c.shouldRetry(retrySafe, 3, api(500, 0)); ok {
		t.Error("retried past Max")
	}
}
