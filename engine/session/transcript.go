package session

// Transcript format (also in docs/transcript.md). The file "transcript" in a session
// dir is append-only: an 8-byte magic "STRATAT1", then frames, each written with one
// write(2) so a reader sees whole frames and at most one partial frame at the end:
//
//	stream  uint8    1 stdout, 2 stderr, 3 pty output, 4 pty resize
//	time    int64    big-endian, unix nanoseconds when the bytes were read
//	length  uint32   big-endian, length of data
//	data    [length]byte
//
// A resize frame's data is rows and cols, each a big-endian uint16.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// TranscriptFile is the transcript's file name inside a session dir.
const TranscriptFile = "transcript"

const (
	transcriptMagic = "STRATAT1"
	frameHeaderLen  = 1 + 8 + 4
	// maxFrameLen bounds a frame so a corrupt length cannot make a reader allocate
	// gigabytes; writers never produce frames this large.
	maxFrameLen = 16 << 20
)

// ErrCorruptTranscript reports a frame that cannot have been written by a session.
var ErrCorruptTranscript = errors.New("corrupt transcript")

// Stream tags where a transcript record's bytes came from.
type Stream uint8

const (
	StreamStdout Stream = 1
	StreamStderr Stream = 2
	StreamPTY    Stream = 3
	StreamResize Stream = 4
)

func (s Stream) String() string {
	switch s {
	case StreamStdout:
		return "stdout"
	case StreamStderr:
		return "stderr"
	case StreamPTY:
		return "pty"
	case StreamResize:
		return "resize"
	}
	return fmt.Sprintf("stream(%d)", uint8(s))
}

// Record is one frame of a transcript.
type Record struct {
	Stream Stream
	Time   time.Time
	Data   []byte
}

// WinSize returns the terminal size carried by a StreamResize record.
func (r Record) WinSize() (WinSize, bool) {
	if r.Stream != StreamResize || len(r.Data) != 4 {
		return WinSize{}, false
	}
	return WinSize{Rows: binary.BigEndian.Uint16(r.Data[0:2]), Cols: binary.BigEndian.Uint16(r.Data[2:4])}, true
}

// TranscriptWriter appends frames; a mutex keeps the frames of concurrent streams whole.
type TranscriptWriter struct {
	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// NewTranscriptWriter appends to the transcript file f, writing its header
// when f is empty.
func NewTranscriptWriter(f *os.File) (*TranscriptWriter, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat transcript: %w", err)
	}
	if info.Size() == 0 {
		if _, err := f.Write([]byte(transcriptMagic)); err != nil {
			return nil, fmt.Errorf("write transcript header: %w", err)
		}
	}
	return &TranscriptWriter{f: f}, nil
}

// Append writes one frame of stream's data read at at.
func (w *TranscriptWriter) Append(stream Stream, at time.Time, data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = appendFrame(w.buf[:0], stream, at, data)
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("append to transcript: %w", err)
	}
	return nil
}

// AppendResize records a terminal size change.
func (w *TranscriptWriter) AppendResize(at time.Time, ws WinSize) error {
	var data [4]byte
	binary.BigEndian.PutUint16(data[0:2], ws.Rows)
	binary.BigEndian.PutUint16(data[2:4], ws.Cols)
	return w.Append(StreamResize, at, data[:])
}

func appendFrame(buf []byte, stream Stream, at time.Time, data []byte) []byte {
	buf = append(buf, byte(stream))
	buf = binary.BigEndian.AppendUint64(buf, uint64(at.UnixNano()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(data)))
	return append(buf, data...)
}

// ReadTranscript reads the whole frames from offset fromOffset (0 = the start) and
// returns them with the offset to continue from. A partially written final frame is
// left for the next call. A missing file reads as empty.
func ReadTranscript(path string, fromOffset int64) ([]Record, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fromOffset, nil
	}
	if err != nil {
		return nil, fromOffset, fmt.Errorf("open transcript: %w", err)
	}
	defer f.Close()
	start := max(fromOffset, 0)
	if start < int64(len(transcriptMagic)) {
		start = 0
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return nil, fromOffset, fmt.Errorf("seek transcript %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fromOffset, fmt.Errorf("read transcript %s: %w", path, err)
	}
	if start == 0 {
		if len(data) < len(transcriptMagic) {
			return nil, 0, nil
		}
		if !bytes.Equal(data[:len(transcriptMagic)], []byte(transcriptMagic)) {
			return nil, 0, fmt.Errorf("read transcript %s: bad header: %w", path, ErrCorruptTranscript)
		}
		data = data[len(transcriptMagic):]
		start = int64(len(transcriptMagic))
	}
	records, used, err := parseFrames(data)
	if err != nil {
		return records, start + int64(used), fmt.Errorf("read transcript %s at %d: %w", path, start+int64(used), err)
	}
	return records, start + int64(used), nil
}

// parseFrames decodes whole frames and returns how many bytes they used.
func parseFrames(data []byte) ([]Record, int, error) {
	var records []Record
	used := 0
	for len(data)-used >= frameHeaderLen {
		h := data[used : used+frameHeaderLen]
		stream := Stream(h[0])
		if stream == 0 {
			return records, used, ErrCorruptTranscript
		}
		n := binary.BigEndian.Uint32(h[9:13])
		if n > maxFrameLen {
			return records, used, ErrCorruptTranscript
		}
		end := used + frameHeaderLen + int(n)
		if end > len(data) {
			break
		}
		records = append(records, Record{
			Stream: stream,
			Time:   time.Unix(0, int64(binary.BigEndian.Uint64(h[1:9]))),
			Data:   data[used+frameHeaderLen : end : end],
		})
		used = end
	}
	return records, used, nil
}

// FollowTranscript calls fn for every record from fromOffset on, following the file
// until the session has ended (or is lost) and all its output has been delivered.
// It returns fn's error, ctx's error, or nil at the end of the session. New output
// is looked for after 1 ms, backing off to 25 ms while the session is quiet.
func FollowTranscript(ctx context.Context, dir string, fromOffset int64, fn func(Record) error) error {
	end := OpenEndWatch(dir)
	defer end.close()
	path := filepath.Join(dir, TranscriptFile)
	offset := fromOffset
	checkMeta := true
	lastMetaCheck := time.Time{}
	backoff := minFollowPoll
	for {
		// The init writes all output before the end in meta.json, so a session seen
		// ended before a read has nothing left to write after it.
		ended := false
		if checkMeta || time.Since(lastMetaCheck) >= LostCheckInterval {
			lastMetaCheck = time.Now()
			meta, err := ReadMeta(dir)
			if err != nil {
				return fmt.Errorf("follow transcript: %w", err)
			}
			ended = meta.State.Ended()
		}
		records, next, err := ReadTranscript(path, offset)
		for _, r := range records {
			if err := fn(r); err != nil {
				return err
			}
		}
		offset = next
		if err != nil {
			return err
		}
		if ended {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(records) > 0 {
			backoff = minFollowPoll
		} else {
			backoff = min(backoff*2, maxFollowPoll)
		}
		end.wait(ctx, backoff)
		checkMeta = end.hup
	}
}

const (
	minFollowPoll = time.Millisecond
	maxFollowPoll = 25 * time.Millisecond
	// LostCheckInterval is how often waiters look at the init's pid when nothing
	// else tells them: an init killed before it opened end.fifo cannot close it.
	LostCheckInterval = 250 * time.Millisecond
)
