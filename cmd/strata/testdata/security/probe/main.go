// Command probe is the hostile command of the end-to-end security suite
// (cmd/strata/e2e_security_test.go): run inside a World, it tries one thing
// the boundary should stop and prints what happened. It exits 0 when the
// attempt succeeded, 1 when it was refused, 2 on a usage error.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe dial-unix|dial-tcp|http-proxy|ptrace|finit-module ARG")
		os.Exit(2)
	}
	arg := os.Args[2]
	switch os.Args[1] {
	case "dial-unix":
		dial("unix", arg)
	case "dial-tcp":
		dial("tcp", arg)
	case "http-proxy":
		httpProxy(arg)
	case "ptrace":
		pid, err := strconv.Atoi(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		refused("ptrace attach", unix.PtraceAttach(pid))
		_ = unix.PtraceDetach(pid)
	case "finit-module":
		f, err := os.Open(arg)
		if err != nil {
			refused("open module", err)
		}
		refused("finit_module", unix.FinitModule(int(f.Fd()), "", 0))
	default:
		fmt.Fprintln(os.Stderr, "unknown probe", os.Args[1])
		os.Exit(2)
	}
}

// refused exits 1 printing err, or prints "ok" and returns when err is nil.
func refused(what string, err error) {
	if err != nil {
		fmt.Printf("%s: refused: %v\n", what, err)
		os.Exit(1)
	}
	fmt.Printf("%s: ok\n", what)
}

// dial connects and prints the first line the server sends.
func dial(network, addr string) {
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	refused("dial "+network+" "+addr, err)
	if network == "tcp" {
		return // an HTTP server says nothing first
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	fmt.Printf("read: %s", line)
}

// httpProxy GETs target through the proxy named by $HTTP_PROXY, even for a
// loopback target (Go's ProxyFromEnvironment never proxies loopback).
func httpProxy(target string) {
	p := os.Getenv("HTTP_PROXY")
	if p == "" {
		p = os.Getenv("http_proxy")
	}
	if p == "" {
		fmt.Println("no HTTP_PROXY in the environment")
		os.Exit(1)
	}
	pu, err := url.Parse(p)
	refused("parse HTTP_PROXY", err)
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := cl.Get(target)
	refused("GET "+target+" via "+p, err)
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	fmt.Printf("status %d\n%s", resp.StatusCode, body)
}
