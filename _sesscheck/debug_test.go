package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDebugTiming(t *testing.T) {
	w := newTestWorld(t, "dbg")
	for i := 0; i < 6; i++ {
		t0 := time.Now()
		meta, err := StartSession(context.Background(), w.spec("/bin/true"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(w.worldDir(), "sessions", meta.ID)
		t1 := time.Now()
		pfd, err := unix.PidfdOpen(meta.InitPID, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
		unix.Poll(fds, 5000)
		t2 := time.Now()
		m, _ := ReadSessionMeta(dir)
		unix.Close(pfd)
		log, _ := os.ReadFile(filepath.Join(dir, "init.log"))
		fmt.Printf("t0 %d start %v pidfd fired at %d (%v) state %s\n%s\n", t0.UnixMicro(), t1.Sub(t0), t2.UnixMicro(), t2.Sub(t1), m.State, log)
	}
}
