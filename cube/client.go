package cube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Config says where CubeSandbox is and how to talk to it.
type Config struct {
	// Endpoint is the CubeAPI base URL, e.g. http://host:3000.
	Endpoint string
	// APIKey is sent on every CubeAPI call when non-empty. The caller reads
	// it from an environment variable; it is never persisted.
	APIKey string
	// AuthHeader is "x-api-key" (default) or "bearer".
	AuthHeader string
	// ProxyAddr, when set, is the host:port of CubeProxy: envd connections
	// dial it whatever the sandbox host name resolves to, keeping the
	// <port>-<sandboxID>.<domain> Host header for routing.
	ProxyAddr string
	// Scheme of envd URLs: "http" (default) or "https".
	Scheme string
	// HTTPClient is used for all calls when set. With ProxyAddr its
	// Transport must be nil or an *http.Transport (it is cloned for envd).
	// Leave its Timeout zero: it would cut long exec streams; deadlines
	// belong in the contexts.
	HTTPClient *http.Client
	// Retry bounds retries of calls that are safe to repeat.
	Retry RetryPolicy
}

// RetryPolicy is exponential backoff with jitter. The zero value means
// DefaultRetry; Max < 0 disables retries.
type RetryPolicy struct {
	Max      int           // retries after the first attempt
	Base     time.Duration // first backoff
	MaxDelay time.Duration // cap of one backoff (a server's Retry-After is honoured beyond it)
}

// DefaultRetry is used when Config.Retry is the zero value.
var DefaultRetry = RetryPolicy{Max: 4, Base: 200 * time.Millisecond, MaxDelay: 5 * time.Second}

// Client talks to one CubeSandbox deployment. It is safe for concurrent use.
type Client struct {
	endpoint  *url.URL
	apiKey    string
	bearer    bool
	scheme    string
	api       *http.Client
	envd      *http.Client
	retry     RetryPolicy
	ownsEnvd  bool
	dialer    net.Dialer
	proxyAddr string
	userAgent string
}

// New checks cfg and builds a Client.
func New(cfg Config) (*Client, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("cube: config: endpoint is empty")
	}
	endpoint, err := url.Parse(strings.TrimRight(cfg.Endpoint, "/"))
	if err != nil || (endpoint.Scheme != "http" && endpoint.Scheme != "https") || endpoint.Host == "" {
		return nil, fmt.Errorf("cube: config: endpoint %q: want http(s)://host[:port]", cfg.Endpoint)
	}
	c := &Client{endpoint: endpoint, apiKey: cfg.APIKey, proxyAddr: cfg.ProxyAddr, userAgent: "strata-cube/1"}
	switch strings.ToLower(cfg.AuthHeader) {
	case "", "x-api-key":
	case "bearer":
		c.bearer = true
	default:
		return nil, fmt.Errorf("cube: config: auth header %q: want x-api-key or bearer", cfg.AuthHeader)
	}
	switch cfg.Scheme {
	case "", "http":
		c.scheme = "http"
	case "https":
		c.scheme = "https"
	default:
		return nil, fmt.Errorf("cube: config: envd scheme %q: want http or https", cfg.Scheme)
	}
	c.retry = cfg.Retry
	if c.retry == (RetryPolicy{}) {
		c.retry = DefaultRetry
	}
	if c.retry.Base <= 0 {
		c.retry.Base = DefaultRetry.Base
	}
	if c.retry.MaxDelay <= 0 {
		c.retry.MaxDelay = DefaultRetry.MaxDelay
	}

	c.api = cfg.HTTPClient
	if c.api == nil {
		c.api = &http.Client{Transport: newTransport()}
	}
	c.envd = c.api
	if cfg.ProxyAddr != "" {
		if _, _, err := net.SplitHostPort(cfg.ProxyAddr); err != nil {
			return nil, fmt.Errorf("cube: config: proxy address %q: %w", cfg.ProxyAddr, err)
		}
		var base *http.Transport
		switch t := c.api.Transport.(type) {
		case nil:
			base = newTransport()
		case *http.Transport:
			base = t.Clone()
		default:
			return nil, fmt.Errorf("cube: config: proxy address needs an *http.Transport, have %T", t)
		}
		// Dial CubeProxy whatever the sandbox name resolves to; the URL's
		// host stays the Host header (and the TLS server name), which is
		// what CubeProxy routes on.
		base.Proxy = nil
		base.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return c.dialer.DialContext(ctx, network, c.proxyAddr)
		}
		c.envd = &http.Client{Transport: base, Jar: c.api.Jar}
		c.ownsEnvd = true
	}
	return c, nil
}

func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Many concurrent creates and execs go to one host (CubeAPI, CubeProxy);
	// the default of 2 idle connections per host would churn connections.
	t.MaxIdleConnsPerHost = 64
	return t
}

// CloseIdleConnections drops pooled keep-alive connections to CubeAPI and
// CubeProxy. Rollback calls it: the restored VM has lost the peers of those
// connections.
func (c *Client) CloseIdleConnections() {
	c.api.CloseIdleConnections()
	if c.ownsEnvd {
		c.envd.CloseIdleConnections()
	}
}

// retryClass says when a call may be repeated.
type retryClass int

const (
	// retrySafe: idempotent calls (GET, DELETE, pause, connect, health).
	retrySafe retryClass = iota
	// retryUnsent: calls that must not run twice (create, rollback): retried
	// only when the server provably did not process the request.
	retryUnsent
	// retrySnapshot: like retryUnsent, plus 409 (another snapshot runs).
	retrySnapshot
)

// call is one logical request, possibly sent several times.
type call struct {
	op          string
	method      string
	url         string
	body        []byte
	contentType string
	header      http.Header
	class       retryClass
	envd        bool  // data plane: envd auth, envd HTTP client
	ok          []int // success statuses
	// goneOK treats 404 on a retry as success: the attempt before may have
	// done the deletion and lost only the reply.
	goneOK bool
}

// reply is a finished, fully read response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) apiURL(p string, query url.Values) string {
	u := *c.endpoint
	u.Path = c.endpoint.Path + p
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return u.String()
}

// do sends a call, retrying as its class allows, and returns the reply of
// the first success.
func (c *Client) do(ctx context.Context, cl call) (*reply, error) {
	for attempt := 0; ; attempt++ {
		rep, sent, err := c.send(ctx, cl)
		if err == nil {
			if cl.goneOK && attempt > 0 && rep.status == http.StatusNotFound {
				return rep, nil
			}
			for _, s := range cl.ok {
				if rep.status == s {
					return rep, nil
				}
			}
			apiErr := parseAPIError(cl.op, &http.Response{StatusCode: rep.status, Header: rep.header}, rep.body)
			err = apiErr
		} else {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, &TransportError{Op: cl.op, Sent: sent, Err: ctxErr}
			}
			err = &TransportError{Op: cl.op, Sent: sent, Err: err}
		}
		delay, retry := c.shouldRetry(cl.class, attempt, err)
		if !retry {
			return nil, err
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			return nil, err
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
	}
}

// shouldRetry decides whether err may be retried and after how long.
func (c *Client) shouldRetry(class retryClass, attempt int, err error) (time.Duration, bool) {
	if c.retry.Max < 0 || attempt >= c.retry.Max {
		return 0, false
	}
	backoff := c.backoff(attempt)
	var transport *TransportError
	if errors.As(err, &transport) {
		if !transport.Sent || class == retrySafe {
			return backoff, true
		}
		return 0, false
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return 0, false
	}
	if apiErr.RetryAfter > 0 {
		backoff = apiErr.RetryAfter
	}
	switch apiErr.Status {
	case http.StatusTooManyRequests:
		// Rate limiting rejects before doing any work.
		return backoff, true
	case http.StatusServiceUnavailable:
		// 503 with Retry-After is "not now" (e.g. delete while pausing);
		// without it the request may have been half done.
		if apiErr.RetryAfter > 0 || class == retrySafe {
			return backoff, true
		}
	case http.StatusConflict:
		if class == retrySnapshot {
			return backoff, true
		}
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		// CubeProxy's "no route" 500 is final: the sandbox is gone.
		if class == retrySafe && apiErr.Retcode != RetcodeNoRoute {
			return backoff, true
		}
	}
	return 0, false
}

// backoff is full-range jitter over [d/2, d], d = Base * 2^attempt capped.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.retry.Base
	for i := 0; i < attempt && d < c.retry.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, c.retry.MaxDelay)
	half := d / 2
	return half + rand.N(d-half+1)
}

// send makes one attempt. sent reports whether the request was written in
// full, i.e. whether the server may have processed it.
func (c *Client) send(ctx context.Context, cl call) (rep *reply, sent bool, err error) {
	resp, sent, err := c.open(ctx, cl)
	if err != nil {
		return nil, sent, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, true, fmt.Errorf("read reply: %w", err)
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: body}, true, nil
}

// open sends the request and returns the response with its body unread.
func (c *Client) open(ctx context.Context, cl call) (*http.Response, bool, error) {
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, cl.url, body)
	if err != nil {
		return nil, false, err
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	if cl.contentType != "" {
		req.Header.Set("Content-Type", cl.contentType)
	}
	req.Header.Set("User-Agent", c.userAgent)
	httpClient := c.api
	if cl.envd {
		httpClient = c.envd
	} else if c.apiKey != "" {
		if c.bearer {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		} else {
			req.Header.Set("X-API-Key", c.apiKey)
		}
	}
	// The transport writes from its own goroutine and may still be running
	// when Do fails, hence the atomic.
	var wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, wrote.Load(), err
	}
	return resp, true, nil
}
