package cube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
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

// Lifecycle says what happens when a sandbox's timeout expires.
type Lifecycle struct {
	OnTimeout  string `json:"onTimeout,omitempty"` // "kill" or "pause"
	AutoResume bool   `json:"autoResume,omitempty"`
}

// Network restricts a sandbox's traffic.
type Network struct {
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string        `json:"allowOut,omitempty"` // CIDRs
	DenyOut            []string        `json:"denyOut,omitempty"`  // CIDRs
	MaskRequestHost    string          `json:"maskRequestHost,omitempty"`
	Rules              json.RawMessage `json:"rules,omitempty"`
}

// CreateRequest is the body of POST /sandboxes.
type CreateRequest struct {
	// TemplateID is a template id or a snapshot id (snap-…).
	TemplateID string
	// Timeout is the idle timeout in seconds: nil = server default,
	// -1 = never, 0 = now. See Seconds.
	Timeout             *int
	EnvVars             map[string]string
	Metadata            map[string]string
	HostMounts          []HostMount // sent as metadata["host-mount"]
	AllowInternetAccess *bool
	Lifecycle           *Lifecycle
	Network             *Network
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
	Lifecycle           *Lifecycle        `json:"lifecycle,omitempty"`
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
		Lifecycle:           r.Lifecycle,
		Network:             r.Network,
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

// EncodeMetadataQuery encodes a metadata filter the way E2B clients do: the
// pairs form-encoded, then the whole string encoded again as one query
// value, e.g. metadata=k%3Dv%26k2%3Dv2.
func EncodeMetadataQuery(filter map[string]string) url.Values {
	if len(filter) == 0 {
		return nil
	}
	inner := url.Values{}
	for k, v := range filter {
		inner.Set(k, v)
	}
	return url.Values{"metadata": {inner.Encode()}}
}

// List returns the sandboxes whose metadata holds every pair of filter.
func (c *Client) List(ctx context.Context, metadataFilter map[string]string) ([]ListedSandbox, error) {
	rep, err := c.do(ctx, call{
		op: "list sandboxes", method: http.MethodGet, url: c.apiURL("/sandboxes", EncodeMetadataQuery(metadataFilter)),
		class: retrySafe, ok: []int{http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	var list []ListedSandbox
	if err := decodeJSON(rep, &list); err != nil {
		return nil, fmt.Errorf("cube: list sandboxes: %w", err)
	}
	return list, nil
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

// Connect returns a running sandbox, resuming it if paused. timeout > 0
// resets its idle timeout (whole seconds, rounded up); 0 leaves it.
func (c *Client) Connect(ctx context.Context, id string, timeout time.Duration) (*Sandbox, error) {
	body := []byte("{}")
	if timeout > 0 {
		secs := int((timeout + time.Second - 1) / time.Second)
		body = []byte(`{"timeout":` + strconv.Itoa(secs) + `}`)
	}
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
