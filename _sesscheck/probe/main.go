package main

import (
	"fmt"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

func main() {
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		w, _ := fsnotify.NewWatcher()
		w.Add("/tmp")
		t1 := time.Now()
		w.Close()
		t2 := time.Now()
		fd, _ := unix.InotifyInit1(unix.IN_CLOEXEC)
		unix.InotifyAddWatch(fd, "/tmp", unix.IN_MOVED_TO)
		t3 := time.Now()
		unix.Close(fd)
		t4 := time.Now()
		fd, _ = unix.InotifyInit1(unix.IN_CLOEXEC)
		t5 := time.Now()
		unix.Close(fd)
		fmt.Fprintln(os.Stdout, "fsnotify new+add", t1.Sub(t0), "close", t2.Sub(t1), "raw add", t3.Sub(t2), "raw close", t4.Sub(t3), "close no watch", time.Since(t5))
	}
}
