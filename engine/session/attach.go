package session

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// DefaultDetachKeys is ctrl-] (0x1d), the key that leaves an attached session
// running; telnet users know it, and programs rarely need it.
var DefaultDetachKeys = []byte{0x1d}

var (
	// ErrDetached: the person pressed the detach keys; the session keeps running.
	ErrDetached = errors.New("detached from session")
	// ErrNotTTY: the session has no terminal to attach to (read its transcript).
	ErrNotTTY = errors.New("session has no terminal")
)

// AttachOptions tune Attach.
type AttachOptions struct {
	// DetachKeys is the input sequence that detaches; nil means DefaultDetachKeys.
	DetachKeys []byte
	// Resize carries terminal size changes to the session.
	Resize <-chan WinSize
	// Replay first writes the recent output (up to 64 KiB), to redraw the screen.
	Replay bool
}

// Attach connects in and out to a PTY session's terminal. It returns nil when the
// session ends (all its output written to out), ErrDetached when the detach keys are
// read from in, or ctx's error. If in has SetReadDeadline (a pipe, a socket, a
// non-blocking file), Attach stops its read before returning; otherwise a read in
// progress is left behind and its bytes are dropped.
func Attach(ctx context.Context, dir string, in io.Reader, out io.Writer, opts AttachOptions) error {
	meta, err := ReadMeta(dir)
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	if !meta.TTY {
		return fmt.Errorf("attach to session %s: %w", meta.ID, ErrNotTTY)
	}
	detachKeys := opts.DetachKeys
	if len(detachKeys) == 0 {
		detachKeys = DefaultDetachKeys
	}
	if meta.State.Ended() {
		return replayEnded(dir, out, opts.Replay)
	}
	conn, err := DialAttach(dir)
	if err != nil {
		if meta, merr := ReadMeta(dir); merr == nil && meta.State.Ended() {
			return replayEnded(dir, out, opts.Replay)
		}
		return fmt.Errorf("attach to session %s: %w", meta.ID, err)
	}
	defer conn.Close()
	var flags byte
	if opts.Replay {
		flags |= AttachReplay
	}
	var wmu sync.Mutex
	send := func(typ byte, data []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return WriteAttachFrame(conn, typ, data)
	}
	if err := send(AttachHello, []byte{flags}); err != nil {
		return fmt.Errorf("attach to session %s: %w", meta.ID, err)
	}

	outputDone := make(chan error, 1)
	go func() {
		_, err := io.Copy(out, conn)
		outputDone <- err
	}()
	detached := make(chan struct{})
	inputDone := make(chan struct{})
	go func() {
		defer close(inputDone)
		d := detector{keys: detachKeys}
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				data, hit := d.feed(buf[:n])
				if len(data) > 0 {
					if send(AttachInput, data) != nil {
						return
					}
				}
				if hit {
					close(detached)
					return
				}
			}
			if err != nil {
				return // EOF: keep showing output until the session ends
			}
		}
	}()
	stopResize := make(chan struct{})
	defer close(stopResize)
	if opts.Resize != nil {
		go func() {
			for {
				select {
				case <-stopResize:
					return
				case ws, ok := <-opts.Resize:
					if !ok {
						return
					}
					var data [4]byte
					binary.BigEndian.PutUint16(data[0:2], ws.Rows)
					binary.BigEndian.PutUint16(data[2:4], ws.Cols)
					if send(AttachResize, data[:]) != nil {
						return
					}
				}
			}
		}()
	}
	stopInput := func() {
		if d, ok := in.(interface{ SetReadDeadline(time.Time) error }); ok {
			if d.SetReadDeadline(time.Now()) == nil {
				<-inputDone
				_ = d.SetReadDeadline(time.Time{})
			}
		}
	}

	select {
	case <-ctx.Done():
		conn.Close()
		DrainErr(outputDone)
		stopInput()
		return ctx.Err()
	case <-detached:
		conn.Close()
		DrainErr(outputDone)
		return ErrDetached
	case err := <-outputDone:
		stopInput()
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("attach to session %s: %w", meta.ID, err)
		}
		return nil
	}
}

// replayEnded shows the tail of an ended session's terminal output.
func replayEnded(dir string, out io.Writer, replay bool) error {
	if !replay {
		return nil
	}
	records, _, err := ReadTranscript(filepath.Join(dir, TranscriptFile), 0)
	if err != nil {
		return err
	}
	var tail []byte
	for _, r := range records {
		if r.Stream == StreamPTY {
			tail = append(tail, r.Data...)
			if len(tail) > 2*replayBytes {
				tail = tail[len(tail)-replayBytes:]
			}
		}
	}
	if len(tail) > replayBytes {
		tail = tail[len(tail)-replayBytes:]
	}
	_, err = out.Write(tail)
	return err
}

// DialAttach connects to a running session's attach socket.
func DialAttach(dir string) (net.Conn, error) {
	p, done, err := socketPath(dir, AttachSocket)
	if err != nil {
		return nil, err
	}
	defer done()
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: p, Net: "unix"})
}

// detector finds the detach sequence in input split across reads, holding back a
// partial match until it is complete or broken.
type detector struct {
	keys    []byte
	pending []byte // a proper prefix of keys, not yet sent
}

// feed returns the bytes to send and whether the detach sequence was completed
// (the bytes after it are dropped).
func (d *detector) feed(p []byte) ([]byte, bool) {
	var out []byte
	for _, b := range p {
		d.pending = append(d.pending, b)
		for !bytes.HasPrefix(d.keys, d.pending) {
			out = append(out, d.pending[0])
			d.pending = d.pending[1:]
		}
		if len(d.pending) == len(d.keys) {
			d.pending = d.pending[:0]
			return out, true
		}
	}
	return out, false
}

// AttachTerminal attaches this process's terminal (stdin, stdout) to a PTY session:
// raw mode while attached, window size changes forwarded, the recent screen replayed
// first. It returns like Attach, with the terminal restored.
func AttachTerminal(ctx context.Context, dir string, detachKeys []byte) error {
	stdinFD := int(os.Stdin.Fd())
	resize := make(chan WinSize, 1)
	if term.IsTerminal(stdinFD) {
		state, err := term.MakeRaw(stdinFD)
		if err != nil {
			return fmt.Errorf("attach: raw terminal: %w", err)
		}
		defer term.Restore(stdinFD, state)
		sendSize := func() {
			if w, h, err := term.GetSize(stdinFD); err == nil {
				select {
				case resize <- WinSize{Rows: uint16(h), Cols: uint16(w)}:
				default:
				}
			}
		}
		sendSize()
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, unix.SIGWINCH)
		defer signal.Stop(winch)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-winch:
					sendSize()
				}
			}
		}()
	}
	// A non-blocking duplicate of stdin can be interrupted when we return, so no
	// read is left behind to steal the next program's input.
	in := io.Reader(os.Stdin)
	// Close-on-exec: nothing strata starts meanwhile may hold the terminal.
	if fd, err := unix.FcntlInt(uintptr(stdinFD), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		if err := unix.SetNonblock(fd, true); err == nil {
			f := os.NewFile(uintptr(fd), "stdin")
			defer func() {
				_ = unix.SetNonblock(fd, false)
				f.Close()
			}()
			in = f
		} else {
			unix.Close(fd)
		}
	}
	return Attach(ctx, dir, in, os.Stdout, AttachOptions{DetachKeys: detachKeys, Resize: resize, Replay: true})
}

// DrainErr waits for a goroutine's result whose error is already reported
// another way (the session's metadata, the caller's own error).
func DrainErr(ch <-chan error) {
	if err := <-ch; err != nil {
		return // reported elsewhere; only the wait matters here
	}
}
