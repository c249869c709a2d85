package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Attach protocol on attach.sock. Client to init: frames of [type uint8][length
// uint32 big-endian][data]; the first frame is a hello. Init to client: the raw
// terminal output, then EOF when the session ends.
const (
	AttachHello  = 1 // data: flags (AttachReplay)
	AttachInput  = 2 // data: bytes for the terminal
	AttachResize = 3 // data: rows, cols as big-endian uint16
)

const (
	AttachReplay = 1 << 0

	// replayBytes is how much recent output the init keeps for a client asking for
	// a replay: enough to redraw a screen of a full-screen program.
	replayBytes = 64 << 10
	// clientQueue bounds the chunks queued for a slow client before it is dropped,
	// so a stuck client never stalls the command's output.
	clientQueue = 1024
)

// WinSize is a terminal size in cells.
type WinSize struct{ Rows, Cols uint16 }

// socketPath returns a path for dir/name that fits a unix socket address (108
// bytes): long state roots are reached through /proc/self/fd of an open dir.
func socketPath(dir, name string) (string, func(), error) {
	p := filepath.Join(dir, name)
	if len(p) < 100 {
		return p, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name, func() { unix.Close(fd) }, nil
}

// Terminal is the terminal a PTYServer serves attached clients: a local
// PTY master, or a cube process's terminal reached through envd.
type Terminal interface {
	// Input writes what a client typed.
	Input(data []byte) error
	// Resize sets the terminal's size.
	Resize(WinSize) error
}

// masterTerminal is a local PTY master.
type masterTerminal struct{ f *os.File }

func (t masterTerminal) Input(data []byte) error {
	// Blocks while the terminal's input queue is full; only this client waits.
	_, err := t.f.Write(data)
	return err
}

func (t masterTerminal) Resize(ws WinSize) error {
	return fileIoctl(t.f, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	})
}

// PTYServer is a PTY session's terminal side, in the session init (or a cube
// session's runner): it copies the terminal's output to the transcript and
// to attached clients, and their input and size changes to the terminal.
type PTYServer struct {
	master     *os.File // local sessions: the PTY master (nil for cube sessions)
	term       Terminal
	slavePath  string
	transcript *TranscriptWriter
	ln         *net.UnixListener

	lastOutput atomic.Int64 // unix nanos

	mu      sync.Mutex
	ring    []byte
	clients map[*attachClient]struct{}
	closed  bool
	writers sync.WaitGroup
}

type attachClient struct {
	conn  net.Conn
	queue chan []byte
}

// ListenAttach listens on the session dir's attach socket.
func ListenAttach(dir string) (*net.UnixListener, error) {
	p, done, err := socketPath(dir, AttachSocket)
	if err != nil {
		return nil, err
	}
	defer done()
	_ = os.Remove(filepath.Join(dir, AttachSocket))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on attach socket: %w", err)
	}
	// The socket file is removed with the session's end through the root handle;
	// the path may not be reachable by then.
	ln.SetUnlinkOnClose(false)
	return ln, nil
}

// OpenPTY opens a terminal pair from the /dev/ptmx the init sees (its private
// devpts) with the master non-blocking, so its reads go through the runtime poller.
func OpenPTY(size WinSize) (master, slave *os.File, slavePath string, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, "", fmt.Errorf("open pty: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, string, error) {
		unix.Close(mfd)
		return nil, nil, "", fmt.Errorf("open pty: %s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock", err)
	}
	if err := unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		return fail("set size", err)
	}
	// TIOCGPTPEER opens the slave without a path lookup.
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		return fail("open slave", errno)
	}
	slavePath, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(sfd)))
	if err != nil {
		unix.Close(int(sfd))
		return fail("name slave", err)
	}
	return os.NewFile(uintptr(mfd), "/dev/ptmx"), os.NewFile(sfd, slavePath), slavePath, nil
}

// fileIoctl runs fn on f's descriptor without switching f to blocking mode.
func fileIoctl(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// NewPTYServer serves a local PTY whose master the server reads (Pump).
func NewPTYServer(master *os.File, slavePath string, tw *TranscriptWriter, ln *net.UnixListener) *PTYServer {
	s := NewTerminalServer(masterTerminal{master}, tw, ln)
	s.master, s.slavePath = master, slavePath
	return s
}

// NewTerminalServer serves a terminal whose output the caller feeds to
// output.
func NewTerminalServer(term Terminal, tw *TranscriptWriter, ln *net.UnixListener) *PTYServer {
	s := &PTYServer{term: term, transcript: tw, ln: ln, clients: map[*attachClient]struct{}{}}
	s.lastOutput.Store(time.Now().UnixNano())
	return s
}

// Pump copies a local terminal's output until it has no writer left (EIO).
func (s *PTYServer) Pump() {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.master.Read(buf)
		if n > 0 {
			s.output(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// output records terminal output in the transcript and sends it to the
// attached clients.
func (s *PTYServer) output(data []byte) {
	now := time.Now()
	s.lastOutput.Store(now.UnixNano())
	_ = s.transcript.Append(StreamPTY, now, data)
	s.broadcast(data)
}

// Write is output, for the terminal's output stream.
func (s *PTYServer) Write(p []byte) (int, error) {
	s.output(p)
	return len(p), nil
}

func (s *PTYServer) broadcast(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ring = append(s.ring, data...)
	if len(s.ring) > replayBytes {
		s.ring = append(s.ring[:0], s.ring[len(s.ring)-replayBytes:]...)
	}
	for c := range s.clients {
		select {
		case c.queue <- slicesClone(data):
		default:
			s.dropLocked(c)
		}
	}
}

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

func (s *PTYServer) dropLocked(c *attachClient) {
	delete(s.clients, c)
	close(c.queue)
}

// Serve accepts attach clients until the listener closes.
func (s *PTYServer) Serve() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.handle(conn)
	}
}

func (s *PTYServer) handle(conn net.Conn) {
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, data, err := ReadAttachFrame(conn)
	if err != nil || typ != AttachHello || len(data) < 1 {
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	c := &attachClient{conn: conn, queue: make(chan []byte, clientQueue)}
	s.mu.Lock()
	if s.closed {
		// Came in as the command ended (a short command ends before its
		// caller attaches): it still gets what the terminal showed.
		var tail []byte
		if data[0]&AttachReplay != 0 {
			tail = slicesClone(s.ring)
		}
		s.mu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = conn.Write(tail)
		conn.Close()
		return
	}
	if data[0]&AttachReplay != 0 && len(s.ring) > 0 {
		c.queue <- slicesClone(s.ring)
	}
	s.clients[c] = struct{}{}
	s.writers.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.writers.Done()
		defer conn.Close()
		for chunk := range c.queue {
			if _, err := conn.Write(chunk); err != nil {
				s.mu.Lock()
				if _, ok := s.clients[c]; ok {
					s.dropLocked(c)
				}
				s.mu.Unlock()
				for range c.queue {
				}
				return
			}
		}
	}()

	for {
		typ, data, err := ReadAttachFrame(conn)
		if err != nil {
			s.mu.Lock()
			if _, ok := s.clients[c]; ok {
				s.dropLocked(c)
			}
			s.mu.Unlock()
			return
		}
		switch typ {
		case AttachInput:
			_ = s.term.Input(data)
		case AttachResize:
			if len(data) == 4 {
				ws := WinSize{Rows: binary.BigEndian.Uint16(data[0:2]), Cols: binary.BigEndian.Uint16(data[2:4])}
				if ws.Rows > 0 && ws.Cols > 0 && s.term.Resize(ws) == nil {
					_ = s.transcript.AppendResize(time.Now(), ws)
				}
			}
		}
	}
}

// Finish stops accepting clients, lets each queued output reach them and closes
// them, so a client sees all output and then EOF.
func (s *PTYServer) Finish(timeout time.Duration) {
	s.mu.Lock()
	s.closed = true
	for c := range s.clients {
		s.dropLocked(c)
	}
	s.mu.Unlock()
	// A client that connected and is not accepted yet is served too (the
	// replay, then EOF), not reset by the listener's close.
	if s.ln != nil {
		_ = s.ln.SetDeadline(time.Now().Add(5 * time.Millisecond))
		for {
			conn, err := s.ln.Accept()
			if err != nil {
				break
			}
			s.handle(conn) // closed: the replay, then EOF
		}
		s.ln.Close()
	}
	done := make(chan struct{})
	go func() { s.writers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// LastOutput is when the terminal last printed, in unix nanoseconds.
func (s *PTYServer) LastOutput() int64 { return s.lastOutput.Load() }

// Abort closes a local PTY's master and the attach listener of a session
// whose command never started.
func (s *PTYServer) Abort() {
	s.CloseMaster()
	s.ln.Close()
}

// CloseMaster closes a local PTY's master once its output is served.
func (s *PTYServer) CloseMaster() {
	if s.master != nil {
		s.master.Close()
	}
}

// WaitingForInput reports whether the terminal's foreground process group is blocked
// reading it and the terminal has been quiet for QuietBeforeWaiting.
func (s *PTYServer) WaitingForInput() bool {
	if time.Since(time.Unix(0, s.lastOutput.Load())) < QuietBeforeWaiting {
		return false
	}
	var fg int
	err := fileIoctl(s.master, func(fd int) (err error) {
		fg, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil || fg <= 0 {
		return false
	}
	return terminalReader("/proc", fg, s.slavePath)
}

// WriteAttachFrame writes one client-to-init frame of the attach protocol.
func WriteAttachFrame(w io.Writer, typ byte, data []byte) error {
	buf := make([]byte, 0, 5+len(data))
	buf = append(buf, typ)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(data)))
	buf = append(buf, data...)
	_, err := w.Write(buf)
	return err
}

// ReadAttachFrame reads one client-to-init frame of the attach protocol.
func ReadAttachFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > 1<<20 {
		return 0, nil, errors.New("attach frame too large")
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, err
	}
	return h[0], data, nil
}
