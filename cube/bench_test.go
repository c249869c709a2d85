package cube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stratahq/strata/cube"
	"github.com/stratahq/strata/cube/cubetest"
)

// BenchmarkCreate50Concurrent creates 50 sandboxes at concurrency 50 per
// iteration (ns/op is one batch of 50). It reports the mean latency of one
// create as the client sees it, the mean time the fake spent handling it
// (making the rootfs and the mount namespace), and the difference: what
// the client, HTTP and waiting for a CPU add per sandbox (on a small
// machine mostly the wait, since the fake's namespace work shares the CPUs).
func BenchmarkCreate50Concurrent(b *testing.B) {
	const n = 50
	srv := cubetest.New(b, cubetest.Options{})
	c := newClient(b, srv)
	ctx := context.Background()
	var latency, server time.Duration
	var creates int
	for b.Loop() {
		srv.ResetRequests()
		ids := make([]string, n)
		lat := make([]time.Duration, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				start := time.Now()
				sb, err := c.Create(ctx, cube.CreateRequest{TemplateID: "base", Metadata: map[string]string{"bench": "1"}})
				lat[i] = time.Since(start)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = sb.SandboxID
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatalf("create: %v", err)
		}
		b.StopTimer()
		for _, r := range requestsTo(srv, "POST /sandboxes") {
			server += r.Duration
		}
		for _, l := range lat {
			latency += l
		}
		creates += n
		for _, id := range ids {
			if err := c.Delete(ctx, id); err != nil {
				b.Fatalf("delete: %v", err)
			}
		}
		b.StartTimer()
	}
	if left := srv.SandboxIDs(); len(left) != 0 {
		b.Fatalf("sandboxes left: %v", left)
	}
	perCreate := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(creates) / 1000 }
	b.ReportMetric(perCreate(latency), "ms-latency/create")
	b.ReportMetric(perCreate(server), "ms-server/create")
	b.ReportMetric(perCreate(latency-server), "ms-outside-handler/create")
}
