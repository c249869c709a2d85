package cube_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

func TestTemplatesListAliasAndBuild(t *testing.T) {
	srv := cubetest.New(t, cubetest.Options{Templates: []string{"base", "tpl-2c4g"}, BuildSteps: 3})
	srv.AddAlias("python", "tpl-2c4g")
	c := newClient(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Templates(ctx)
	if err != nil || len(list) != 2 || list[1].TemplateID != "tpl-2c4g" || list[1].Status != cube.TemplateReady {
		t.Fatalf("templates = %+v, %v", list, err)
	}
	if id, err := c.TemplateByAlias(ctx, "python"); err != nil || id != "tpl-2c4g" {
		t.Errorf("alias = %q, %v", id, err)
	}
	if _, err := c.TemplateByAlias(ctx, "nope"); !errors.Is(err, cube.ErrNotFound) {
		t.Errorf("unknown alias: %v, want ErrNotFound", err)
	}

	job, err := c.StartTemplateBuild(ctx, cube.TemplateBuild{TemplateID: "strata-4c8g", Image: "ubuntu:24.04", Extra: map[string]any{"cpu": 4000, "memory": 8192}})
	if err != nil {
		t.Fatalf("start build: %v", err)
	}
	body := onlyRequest(t, srv, "POST /templates").Body
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil || sent["templateID"] != "strata-4c8g" || sent["image"] != "ubuntu:24.04" || sent["cpu"] != float64(4000) {
		t.Errorf("build request = %s", body)
	}
	var seen []int
	st, err := c.WaitTemplateBuild(ctx, job.TemplateID, job.JobID, time.Millisecond, func(s cube.BuildStatus) { seen = append(seen, s.Progress) })
	if err != nil || st.Status != cube.TemplateReady || len(seen) != 3 || seen[2] != 100 {
		t.Fatalf("wait = %+v, %v; progress %v", st, err, seen)
	}
	if _, err := c.Create(ctx, cube.CreateRequest{TemplateID: "strata-4c8g"}); err != nil {
		t.Errorf("create from the built template: %v", err)
	}

	bad, err := c.StartTemplateBuild(ctx, cube.TemplateBuild{TemplateID: "broken", Image: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitTemplateBuild(ctx, bad.TemplateID, bad.JobID, time.Millisecond, nil); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("failed build: %v", err)
	}
	if _, err := c.StartTemplateBuild(ctx, cube.TemplateBuild{TemplateID: "x"}); err == nil {
		t.Error("a build without an image was sent")
	}
}

func TestClusterCapacity(t *testing.T) {
	nodes := []cube.Node{
		{NodeID: "n1", HostIP: "10.0.0.1", Healthy: true, Capacity: cube.NodeResources{CPUCores: 96, MemoryMB: 384000}, Allocatable: cube.NodeResources{CPUCores: 40, MemoryMB: 100000}, CPUSaturation: 58.3, MemorySaturation: 74, MaxMvmSlots: 1000},
		{NodeID: "n2", HostIP: "10.0.0.2", Capacity: cube.NodeResources{CPUCores: 32, MemoryMB: 128000}},
	}
	srv := cubetest.New(t, cubetest.Options{Nodes: nodes})
	c := newClient(t, srv)
	ctx := context.Background()
	got, err := c.Nodes(ctx)
	if err != nil || len(got) != 2 || got[0].CPUSaturation != 58.3 || got[0].Allocatable.CPUCores != 40 {
		t.Fatalf("nodes = %+v, %v", got, err)
	}
	o, err := c.Cluster(ctx)
	if err != nil || o.NodeCount != 2 || o.HealthyNodes != 1 || o.TotalCPUCores != 128 {
		t.Fatalf("overview = %+v, %v", o, err)
	}
	// A deployment without the /cubeapi/v1 surface says so.
	bare := newClient(t, cubetest.New(t, cubetest.Options{}))
	if _, err := bare.Nodes(ctx); !errors.Is(err, cube.ErrNoClusterAPI) {
		t.Errorf("nodes without the surface: %v, want ErrNoClusterAPI", err)
	}
}
