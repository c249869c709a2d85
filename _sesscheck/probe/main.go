package main

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	for i := 0; i < 5; i++ {
		fd, _ := unix.InotifyInit1(unix.IN_CLOEXEC)
		wd, _ := unix.InotifyAddWatch(fd, "/tmp", unix.IN_MOVED_TO)
		t3 := time.Now()
		unix.InotifyRmWatch(fd, uint32(wd))
		t4 := time.Now()
		unix.Close(fd)
		t5 := time.Now()
		fmt.Println("rm", t4.Sub(t3), "close", t5.Sub(t4))
	}
	for i := 0; i < 3; i++ {
		fd, _ := unix.InotifyInit1(unix.IN_CLOEXEC)
		wd, _ := unix.InotifyAddWatch(fd, "/tmp", unix.IN_MOVED_TO)
		unix.InotifyRmWatch(fd, uint32(wd))
		time.Sleep(50 * time.Millisecond)
		t4 := time.Now()
		unix.Close(fd)
		fmt.Println("close after sleep", time.Since(t4))
	}
}
