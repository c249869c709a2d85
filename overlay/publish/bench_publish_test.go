package publish

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratahq/strata/overlay/overlaytest"

	"golang.org/x/sys/unix"
)

// benchPublishOps changes 1,000 files: 600 overwrites in 20 existing
// directories, 300 new files in 20 new directories, 100 deletes.
func benchPublishOps() (map[string]string, []PublishOp) {
	tree := map[string]string{}
	var ops []PublishOp
	for d := range 20 {
		for f := range 35 {
			p := fmt.Sprintf("src/m%02d/file%03d.c", d, f)
			tree[p] = "int old_" + fmt.Sprint(f) + ";\n"
			switch {
			case f < 30:
				ops = append(ops, PublishOp{Path: p, Kind: OpWrite, Data: []byte("int new_" + fmt.Sprint(f) + ";\n"), Mode: 0o644})
			default:
				ops = append(ops, PublishOp{Path: p, Kind: OpDelete})
			}
		}
		for f := range 15 {
			ops = append(ops, PublishOp{Path: fmt.Sprintf("src/n%02d/gen/file%03d.c", d, f), Kind: OpWrite, Data: []byte("int gen;\n")})
		}
	}
	return tree, ops
}

// BenchmarkPublish1000 publishes 1,000 changed files, fsynced, with each
// sync strategy; the per-phase times are reported as metrics.
func BenchmarkPublish1000(b *testing.B) {
	tree, ops := benchPublishOps()
	if len(ops) != 1000 {
		b.Fatalf("%d ops", len(ops))
	}
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"perfile", SyncPerFile}, {"syncfs", SyncFS}} {
		b.Run(mode.name, func(b *testing.B) {
			var planned, create, prepare, commit, complete time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				dir := b.TempDir()
				root := filepath.Join(dir, "root")
				overlaytest.WriteTree(b, root, tree)
				// The source tree is normally clean on disk; flush the fixture
				// so its own writeback is not billed to the publication.
				unix.Sync()
				var t0, tPlanned, tCreated, tPrepared, tCommitted time.Time
				publishTestHook = func(stage string) {
					switch stage {
					case "validated":
						t0 = time.Now()
					case "planned":
						tPlanned = time.Now()
					case "created":
						tCreated = time.Now()
					case "prepared":
						tPrepared = time.Now()
					case "committed":
						tCommitted = time.Now()
					}
				}
				b.StartTimer()
				if _, err := Publish(context.Background(), root, filepath.Join(dir, "journal"), ops, PublishOptions{Sync: mode.sync}); err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				b.StopTimer()
				publishTestHook = nil
				planned += tPlanned.Sub(t0)
				create += tCreated.Sub(tPlanned)
				prepare += tPrepared.Sub(tCreated)
				commit += tCommitted.Sub(tPrepared)
				complete += end.Sub(tCommitted)
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(planned.Milliseconds())/n, "plan-ms/op")
			b.ReportMetric(float64(create.Milliseconds())/n, "create-ms/op")
			b.ReportMetric(float64(prepare.Milliseconds())/n, "sync1-ms/op")
			b.ReportMetric(float64(commit.Milliseconds())/n, "commit-ms/op")
			b.ReportMetric(float64(complete.Milliseconds())/n, "rename+sync2-ms/op")
		})
	}
}
