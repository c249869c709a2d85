package cube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrNoClusterAPI means the deployment does not serve the cluster and node
// routes (/cubeapi/v1/cluster/overview, /cubeapi/v1/nodes): CubeAPI builds
// that mount the /cubeapi/v1 dashboard surface serve them, newer ones that
// dropped it do not.
var ErrNoClusterAPI = errors.New("cube: the deployment does not expose cluster capacity (no /cubeapi/v1 surface)")

// ClusterOverview is CubeAPI's ClusterOverview.
type ClusterOverview struct {
	NodeCount           int   `json:"nodeCount"`
	HealthyNodes        int   `json:"healthyNodes"`
	TotalCPUCores       int64 `json:"totalCpuCores"`
	AllocatableCPUCores int64 `json:"allocatableCpuCores"`
	TotalMemoryMB       int64 `json:"totalMemoryMB"`
	AllocatableMemoryMB int64 `json:"allocatableMemoryMB"`
	MaxMvmSlots         int64 `json:"maxMvmSlots"`
}

// NodeResources is CubeAPI's NodeResourcesView.
type NodeResources struct {
	CPUCores int64 `json:"cpuCores"`
	MemoryMB int64 `json:"memoryMB"`
}

// Node is CubeAPI's NodeView: one host's capacity and saturation.
type Node struct {
	NodeID           string        `json:"nodeID"`
	HostIP           string        `json:"hostIP"`
	InstanceType     string        `json:"instanceType,omitempty"`
	Healthy          bool          `json:"healthy"`
	Capacity         NodeResources `json:"capacity"`
	Allocatable      NodeResources `json:"allocatable"`
	CPUSaturation    float64       `json:"cpuSaturation"`    // percent in use
	MemorySaturation float64       `json:"memorySaturation"` // percent in use
	MaxMvmSlots      int64         `json:"maxMvmSlots"`
	HeartbeatTime    *time.Time    `json:"heartbeatTime,omitempty"`
	LocalTemplates   []string      `json:"localTemplates,omitempty"`
}

// Cluster returns the cluster overview (GET /cubeapi/v1/cluster/overview),
// ErrNoClusterAPI where the deployment lacks it.
func (c *Client) Cluster(ctx context.Context) (ClusterOverview, error) {
	var out ClusterOverview
	err := c.getCluster(ctx, "cluster overview", "/cubeapi/v1/cluster/overview", &out)
	return out, err
}

// Nodes returns every node's capacity and saturation (GET
// /cubeapi/v1/nodes), ErrNoClusterAPI where the deployment lacks it.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out []Node
	err := c.getCluster(ctx, "list nodes", "/cubeapi/v1/nodes", &out)
	return out, err
}

func (c *Client) getCluster(ctx context.Context, op, route string, v any) error {
	rep, err := c.do(ctx, call{op: op, method: http.MethodGet, url: c.apiURL(route, nil), class: retrySafe, ok: []int{http.StatusOK}})
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNoClusterAPI, err)
	}
	if err != nil {
		return err
	}
	if err := decodeJSON(rep, v); err != nil {
		return fmt.Errorf("cube: %s: %w", op, err)
	}
	return nil
}
