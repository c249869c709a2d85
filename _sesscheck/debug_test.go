package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDebugTiming(t *testing.T) {
	w := newTestWorld(t, "dbg")
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		meta, err := StartSession(context.Background(), w.spec("/bin/true"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(w.worldDir(), "sessions", meta.ID)
		t1 := time.Now()
		WaitSession(context.Background(), dir)
		t2 := time.Now()
		log, _ := os.ReadFile(filepath.Join(dir, "init.log"))
		fmt.Printf("t0 %d start %v wait %v\n%s\n", t0.UnixMicro(), t1.Sub(t0), t2.Sub(t1), log)
	}
}
