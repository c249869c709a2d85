package cube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors; match them with errors.Is on any error this package returns.
var (
	ErrNotFound     = errors.New("cube: not found")
	ErrConflict     = errors.New("cube: conflict")
	ErrUnauthorized = errors.New("cube: unauthorized")
	ErrTimeout      = errors.New("cube: timeout")
	ErrUnavailable  = errors.New("cube: unavailable")
	ErrRateLimited  = errors.New("cube: rate limited")
	// ErrStreamDropped means an exec stream ended before the process's end
	// event: the command may or may not still be running, and it is never
	// retried because exec is not idempotent.
	ErrStreamDropped = errors.New("cube: exec stream dropped before the process ended")
	// ErrSnapshotUnsupported means the deployment answered a snapshot
	// request without taking one (an older CubeAPI/CubeMaster pair).
	ErrSnapshotUnsupported = errors.New("cube: the deployment does not take snapshots")
)

// templateNotFoundCode is CubeMaster's "not found" code; CubeAPI reports an
// unknown template on create as a 500 whose message carries it.
const templateNotFoundCode = "130404"

// APIError is a non-success HTTP reply from CubeAPI, CubeProxy or envd.
type APIError struct {
	Op         string        // what was being done, e.g. "create sandbox"
	Status     int           // HTTP status
	Code       int           // "code" from a {"code","message"} body, else 0
	Message    string        // "message", or the plain-text body (422 replies are text)
	RetryAfter time.Duration // from the Retry-After header, 0 if absent
	// Retcode is CubeProxy's X-Cube-Retcode header, e.g. "310507" (no
	// route to the sandbox: it is gone), empty when absent.
	Retcode string
}

// CubeProxy retcodes (CubeProxy/lua/rewrite_phase.lua): what went wrong
// before a request reached the sandbox.
const (
	RetcodeBadHost      = "310400" // the Host header names no <port>-<sandbox>
	RetcodeRouteLookup  = "310500" // the routing store (redis) failed
	RetcodeNoRoute      = "310507" // no HostIP / port mapping: the sandbox is gone
	RetcodeFaultBackend = "340500" // the sandbox's node is marked faulty
)

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("cube: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "HTTP %d", e.Status)
	if e.Retcode != "" {
		fmt.Fprintf(&b, " (CubeProxy retcode %s", e.Retcode)
		if e.Retcode == RetcodeNoRoute {
			b.WriteString(": no route to the sandbox, it is gone")
		}
		b.WriteString(")")
	}
	if e.Code != 0 && e.Code != e.Status {
		fmt.Fprintf(&b, " (code %d)", e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is maps HTTP statuses onto the package's sentinel errors.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound || e.Status == http.StatusGone ||
			e.Retcode == RetcodeNoRoute || strings.Contains(e.Message, templateNotFoundCode)
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrTimeout:
		return e.Status == http.StatusRequestTimeout || e.Status == http.StatusGatewayTimeout
	case ErrUnavailable:
		return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusBadGateway ||
			e.Retcode == RetcodeRouteLookup || e.Retcode == RetcodeFaultBackend
	case ErrRateLimited:
		return e.Status == http.StatusTooManyRequests
	}
	return false
}

// TransportError is a failure below HTTP: the connection could not be made,
// or broke before a reply arrived.
type TransportError struct {
	Op string
	// Sent reports whether the request may have reached the server (it was
	// written in full); when false the server provably did not process it.
	Sent bool
	Err  error
}

func (e *TransportError) Error() string {
	state := "not sent"
	if e.Sent {
		state = "sent"
	}
	return fmt.Sprintf("cube: %s: %v (request %s)", e.Op, e.Err, state)
}

func (e *TransportError) Unwrap() error { return e.Err }

// Is makes an unreachable server ErrUnavailable and an expired deadline
// ErrTimeout.
func (e *TransportError) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return !e.Sent
	case ErrTimeout:
		return errors.Is(e.Err, context.DeadlineExceeded)
	}
	return false
}

// StreamError is an error carried by the end-of-stream message of a Connect
// stream (envd), e.g. {"error":{"code":"not_found","message":"..."}}.
type StreamError struct {
	Op      string
	Code    string
	Message string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("cube: %s: envd error %s: %s", e.Op, e.Code, e.Message)
}

// Is maps Connect error codes onto the package's sentinel errors.
func (e *StreamError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == "not_found"
	case ErrUnauthorized:
		return e.Code == "unauthenticated" || e.Code == "permission_denied"
	case ErrTimeout:
		return e.Code == "deadline_exceeded"
	case ErrUnavailable:
		return e.Code == "unavailable"
	case ErrConflict:
		return e.Code == "already_exists" || e.Code == "aborted"
	}
	return false
}

// parseAPIError builds an APIError from a reply. The body is
// {"code": <int>, "message": "..."} for CubeAPI, {"code": "<string>", ...}
// for Connect endpoints, and plain text for 422 and for proxies.
func parseAPIError(op string, resp *http.Response, body []byte) *APIError {
	e := &APIError{
		Op: op, Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
		Retcode: resp.Header.Get("X-Cube-Retcode"),
	}
	if e.Retcode == "310200" || e.Status < 300 {
		e.Retcode = "" // 310200 means "proxied": the reply is the sandbox's own
	}
	var parsed struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if err := json.Unmarshal(body, &parsed); err == nil && (parsed.Message != "" || len(parsed.Code) > 0) {
		e.Message = parsed.Message
		var code int
		var name string
		switch {
		case json.Unmarshal(parsed.Code, &code) == nil:
			e.Code = code
		case json.Unmarshal(parsed.Code, &name) == nil && name != "":
			e.Message = strings.TrimSpace(name + ": " + e.Message)
		}
		return e
	}
	const maxText = 1024
	text := strings.TrimSpace(string(body))
	if strings.HasPrefix(strings.ToLower(text), "<html") {
		text = "" // a proxy's stock page says nothing the status does not
	}
	if len(text) > maxText {
		text = text[:maxText] + "…"
	}
	e.Message = text
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
