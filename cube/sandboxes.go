package cube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HostMountKey is the metadata key CubeMaster reads host mounts from.
const HostMountKey = "host-mount"

// HostMount makes a host directory (or file) visible in the sandbox.
type HostMount struct {
	HostPath  string `json:"hostPath"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly"`
}

// AutoResume is CubeAPI's autoResume object (SandboxAutoResumeConfig).
type AutoResume struct {
	Enabled bool `json:"enabled"`
}

// Network is CubeAPI's SandboxNetworkConfig. CubeAPI turns it into
// CubeMaster's cubevs_context: AllowPublicTraffic, when set, wins over
// CreateRequest.AllowInternetAccess as the sandbox's internet access;
// AllowOut and DenyOut are egress allow and deny lists (CIDRs or host
// names) enforced by CubeVS. MaskRequestHost is accepted and not forwarded
// by current CubeAPI.
type Network struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
	MaskRequestHost    string   `json:"maskRequestHost,omitempty"`
}

// CreateRequest is the body of POST /sandboxes.
type CreateRequest struct {
	// TemplateID is a template id or a snapshot id (snap-…).
	TemplateID string
	// Timeout (seconds, ≥ 0) is forwarded as CubeMaster's create timeout;
	// CubeAPI defaults it to 15 when absent. It is not E2B's idle timeout:
	// CubeAPI neither kills nor pauses an idle sandbox from it. nil leaves
	// the server default. See Seconds.
	Timeout  *int
	EnvVars  map[string]string
	Metadata map[string]string
	// HostMounts are sent as metadata["host-mount"]; CubeAPI moves that
	// key into a CubeMaster annotation, so it is never listed back.
	HostMounts []HostMount
	// AllowInternetAccess is sent as allow_internet_access (the E2B SDK's
	// snake_case quirk); Network.AllowPublicTraffic overrides it.
	AllowInternetAccess *bool
	// AutoPause is E2B's autoPause flag. Current CubeAPI parses and then
	// ignores it; it is sent so E2B-compatible servers pause, not kill.
	AutoPause bool
	// AutoResume is E2B's autoResume{enabled}. Current CubeAPI parses and
	// ignores it too; CubeProxy's resumer decides auto-resume.
	AutoResume *AutoResume
	Network    *Network
}

// Seconds returns a pointer for CreateRequest.Timeout.
func Seconds(n int) *int { return &n }

// Bool returns a pointer for optional flags.
func Bool(v bool) *bool { return &v }

// createBody is the wire form; field order is the order on the wire.
type createBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int              `json:"timeout,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	AutoPause           bool              `json:"autoPause,omitempty"`
	AutoResume          *AutoResume       `json:"autoResume,omitempty"`
	Network             *Network          `json:"network,omitempty"`
}

// Sandbox is CubeAPI's reply to create and connect. It is all Exec and the
// file calls need, so callers may persist it (it holds access tokens when
// the deployment hands them out: store it accordingly).
type Sandbox struct {
	TemplateID         string `json:"templateID"`
	SandboxID          string `json:"sandboxID"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	Domain             string `json:"domain"`
	Alias              string `json:"alias,omitempty"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
}

// Sandbox states in ListedSandbox.State.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StatePausing = "pausing"
)

// VolumeMount is a named volume mounted in a sandbox.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// ListedSandbox is one entry of GET /sandboxes; GET /sandboxes/{id} adds
// Domain.
type ListedSandbox struct {
	TemplateID   string            `json:"templateID"`
	SandboxID    string            `json:"sandboxID"`
	ClientID     string            `json:"clientID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        *time.Time        `json:"endAt,omitempty"`
	CPUCount     int               `json:"cpuCount"`
	CPUMilli     int               `json:"cpuMilli,omitempty"`
	MemoryMB     int               `json:"memoryMB"`
	DiskSizeMB   int               `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []VolumeMount     `json:"volumeMounts,omitempty"`
	Domain       string            `json:"domain,omitempty"`
}

// HostMounts decodes metadata["host-mount"].
func (s *ListedSandbox) HostMounts() ([]HostMount, error) {
	return DecodeHostMounts(s.Metadata[HostMountKey])
}

// DecodeHostMounts parses the metadata["host-mount"] JSON string.
func DecodeHostMounts(v string) ([]HostMount, error) {
	if v == "" {
		return nil, nil
	}
	var mounts []HostMount
	if err := json.Unmarshal([]byte(v), &mounts); err != nil {
		return nil, fmt.Errorf("cube: decode %s metadata: %w", HostMountKey, err)
	}
	return mounts, nil
}

// Health is GET /health.
type Health struct {
	Status    string `json:"status"`
	Sandboxes int    `json:"sandboxes"`
}

// EncodeCreateRequest returns the exact body Create sends. The engine
// records it for Worlds planned while Cube is unreachable.
func EncodeCreateRequest(r CreateRequest) ([]byte, error) {
	if r.TemplateID == "" {
		return nil, fmt.Errorf("cube: create request: template id is empty")
	}
	body := createBody{
		TemplateID:          r.TemplateID,
		Timeout:             r.Timeout,
		EnvVars:             r.EnvVars,
		Metadata:            r.Metadata,
		AllowInternetAccess: r.AllowInternetAccess,
		AutoPause:           r.AutoPause,
		AutoResume:          r.AutoResume,
		Network:             r.Network,
	}
	if r.Timeout != nil && *r.Timeout < 0 {
		return nil, fmt.Errorf("cube: create request: timeout %d: CubeAPI takes seconds ≥ 0", *r.Timeout)
	}
	if len(r.HostMounts) > 0 {
		if _, taken := r.Metadata[HostMountKey]; taken {
			return nil, fmt.Errorf("cube: create request: both HostMounts and metadata[%q] are set", HostMountKey)
		}
		mounts, err := json.Marshal(r.HostMounts)
		if err != nil {
			return nil, fmt.Errorf("cube: encode host mounts: %w", err)
		}
		body.Metadata = make(map[string]string, len(r.Metadata)+1)
		for k, v := range r.Metadata {
			body.Metadata[k] = v
		}
		body.Metadata[HostMountKey] = string(mounts)
	}
	return json.Marshal(body)
}

// Create starts a sandbox (POST /sandboxes → 201). It is retried only when
// the server provably did not process the request (connection refused,
// 429, 503 with Retry-After): a create that may have happened is never
// repeated, so a failure can leave a sandbox behind, findable by metadata.
func (c *Client) Create(ctx context.Context, r CreateRequest) (*Sandbox, error) {
	body, err := EncodeCreateRequest(r)
	if err != nil {
		return nil, err
	}
	rep, err := c.do(ctx, call{
		op: "create sandbox from " + r.TemplateID, method: http.MethodPost, url: c.apiURL("/sandboxes", nil),
		body: body, contentType: "application/json", class: retryUnsent, ok: []int{http.StatusCreated, http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := decodeJSON(rep, &sb); err != nil {
		return nil, fmt.Errorf("cube: create sandbox from %s: %w", r.TemplateID, err)
	}
	if sb.TemplateID == "" {
		sb.TemplateID = r.TemplateID
	}
	return &sb, nil
}

// EncodeMetadataQuery encodes a metadata filter as CubeAPI reads it: the
// pairs joined raw as k=v&k2=v2 (sorted), encoded once as the value of
// metadata. CubeAPI decodes the query once and splits on & and the first =
// (services/sandboxes.rs filter_by_metadata), so a pair whose key holds & or
// =, or whose value holds &, cannot be said; such pairs are left out here
// and List checks them on the reply.
func EncodeMetadataQuery(filter map[string]string) url.Values {
	keys := make([]string, 0, len(filter))
	for k, v := range filter {
		if expressible(k, v) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + filter[k]
	}
	return url.Values{"metadata": {strings.Join(pairs, "&")}}
}

func expressible(k, v string) bool {
	return k != "" && !strings.ContainsAny(k, "&=") && !strings.Contains(v, "&")
}

// matchesMetadata reports whether md holds every pair of filter.
func matchesMetadata(md, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// List returns the sandboxes whose metadata holds every pair of filter.
// The server filters what the query can say; the reply is checked against
// the whole filter.
func (c *Client) List(ctx context.Context, metadataFilter map[string]string) ([]ListedSandbox, error) {
	return c.list(ctx, "/sandboxes", nil, metadataFilter)
}

// ListV2 is GET /v2/sandboxes: List with a state filter (StateRunning or
// StatePaused, "" for any) and a limit (0: the server's default of 100).
// CubeAPI answers one page, without a next token.
func (c *Client) ListV2(ctx context.Context, state string, limit int, metadataFilter map[string]string) ([]ListedSandbox, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return c.list(ctx, "/v2/sandboxes", q, metadataFilter)
}

func (c *Client) list(ctx context.Context, route string, q url.Values, filter map[string]string) ([]ListedSandbox, error) {
	if q == nil {
		q = url.Values{}
	}
	for k, v := range EncodeMetadataQuery(filter) {
		q[k] = v
	}
	rep, err := c.do(ctx, call{
		op: "list sandboxes", method: http.MethodGet, url: c.apiURL(route, q),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var list []ListedSandbox
	if err := decodeJSON(rep, &list); err != nil {
		return nil, fmt.Errorf("cube: list sandboxes: %w", err)
	}
	out := list[:0]
	for _, sb := range list {
		if matchesMetadata(sb.Metadata, filter) {
			out = append(out, sb)
		}
	}
	return out, nil
}

// Get returns one sandbox (ErrNotFound once it is gone).
func (c *Client) Get(ctx context.Context, id string) (*ListedSandbox, error) {
	op := "get sandbox " + id
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodGet, url: c.apiURL("/sandboxes/"+url.PathEscape(id), nil),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var sb ListedSandbox
	if err := decodeJSON(rep, &sb); err != nil {
		return nil, fmt.Errorf("cube: %s: %w", op, err)
	}
	return &sb, nil
}

// Delete kills a sandbox (204). While it is pausing CubeAPI answers 503
// with Retry-After; Delete waits and tries again. A 404 on a retry counts as
// done (the earlier attempt deleted it and lost only the reply).
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{
		op: "delete sandbox " + id, method: http.MethodDelete, url: c.apiURL("/sandboxes/"+url.PathEscape(id), nil),
		class: retrySafe, ok: []int{http.StatusNoContent, http.StatusOK}, goneOK: true,
	})
	return err
}

// Pause freezes a sandbox, memory included (204).
func (c *Client) Pause(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{
		op: "pause sandbox " + id, method: http.MethodPost, url: c.apiURL("/sandboxes/"+url.PathEscape(id)+"/pause", nil),
		class: retrySafe, ok: []int{http.StatusNoContent, http.StatusOK},
	})
	return err
}

// DefaultConnectTimeout is the timeout Connect sends when the caller has
// none: CubeAPI requires the field (422 without it) and passes it to
// CubeMaster's resume of a paused sandbox. It is E2B's default sandbox
// timeout.
const DefaultConnectTimeout = 300 * time.Second

// Connect returns a running sandbox, resuming it if paused. timeout is sent
// in whole seconds, rounded up; 0 sends DefaultConnectTimeout.
func (c *Client) Connect(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	secs := int((timeout + time.Second - 1) / time.Second)
	body := []byte(`{"timeout":` + strconv.Itoa(secs) + `}`)
	op := "connect sandbox " + id
	rep, err := c.do(ctx, call{
		op: op, method: http.MethodPost, url: c.apiURL("/sandboxes/"+url.PathEscape(id)+"/connect", nil),
		body: body, contentType: "application/json", class: retrySafe, ok: []int{http.StatusOK, http.StatusCreated},
	})
	if err != nil {
		return nil, err
	}
	var sb Sandbox
	if err := decodeJSON(rep, &sb); err != nil {
		return nil, fmt.Errorf("cube: %s: %w", op, err)
	}
	return &sb, nil
}

// Health is GET /health.
func (c *Client) Health(ctx context.Context) (Health, error) {
	rep, err := c.do(ctx, call{
		op: "health", method: http.MethodGet, url: c.apiURL("/health", nil),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return Health{}, err
	}
	var h Health
	if err := decodeJSON(rep, &h); err != nil {
		return Health{}, fmt.Errorf("cube: health: %w", err)
	}
	return h, nil
}

func decodeJSON(rep *reply, v any) error {
	if err := json.Unmarshal(rep.body, v); err != nil {
		return fmt.Errorf("decode HTTP %d reply: %w", rep.status, err)
	}
	return nil
}
