package session

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratahq/strata/fsx"
)

func TestTranscriptFrames(t *testing.T) {
	path := filepath.Join(t.TempDir(), TranscriptFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw, err := NewTranscriptWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 123456789)
	tw.Append(StreamStdout, at, []byte("out\n"))
	tw.Append(StreamStderr, at.Add(time.Millisecond), []byte("err\n"))
	tw.Append(StreamStdout, at, []byte{}) // empty frames are legal
	tw.AppendResize(at, WinSize{Rows: 24, Cols: 80})

	records, next, err := ReadTranscript(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	if len(records) != 4 || next != info.Size() {
		t.Fatalf("read %d records up to %d, want 4 up to %d", len(records), next, info.Size())
	}
	if records[0].Stream != StreamStdout || string(records[0].Data) != "out\n" || !records[0].Time.Equal(at) {
		t.Errorf("record 0 = %+v", records[0])
	}
	if records[1].Stream != StreamStderr || string(records[1].Data) != "err\n" {
		t.Errorf("record 1 = %+v", records[1])
	}
	if ws, ok := records[3].WinSize(); !ok || ws != (WinSize{24, 80}) {
		t.Errorf("resize record = %+v", records[3])
	}

	// A half-written frame is left for later; once whole it is read from the offset.
	frame := appendFrame(nil, StreamStdout, at, []byte("partial"))
	f.Write(frame[:7])
	more, next2, err := ReadTranscript(path, next)
	if err != nil || len(more) != 0 || next2 != next {
		t.Fatalf("partial frame: %d records, offset %d, %v", len(more), next2, err)
	}
	f.Write(frame[7:])
	more, next3, err := ReadTranscript(path, next2)
	if err != nil || len(more) != 1 || string(more[0].Data) != "partial" || next3 != next+int64(len(frame)) {
		t.Fatalf("completed frame: %+v, offset %d, %v", more, next3, err)
	}

	// Garbage is reported, not skipped silently.
	bad := filepath.Join(t.TempDir(), TranscriptFile)
	os.WriteFile(bad, []byte("NOTATRANSCRIPT"), 0o600)
	if _, _, err := ReadTranscript(bad, 0); !errors.Is(err, ErrCorruptTranscript) {
		t.Errorf("bad header: %v", err)
	}
	os.WriteFile(bad, append([]byte(transcriptMagic), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'x'), 0o600)
	if _, _, err := ReadTranscript(bad, 0); !errors.Is(err, ErrCorruptTranscript) {
		t.Errorf("stream 0: %v", err)
	}
	if recs, off, err := ReadTranscript(filepath.Join(t.TempDir(), "missing"), 0); err != nil || recs != nil || off != 0 {
		t.Errorf("missing transcript: %v %v %v", recs, off, err)
	}
}

func TestRedactEnv(t *testing.T) {
	got := RedactEnv([]string{"PATH=/bin", "GITHUB_TOKEN=abc", "aws_secret_access_key=x", "MY_PASSWORD=p", "SSH_AUTH_SOCK=/s", "NOEQUALS"}, DefaultEnvRedact)
	want := []string{"PATH=/bin", "GITHUB_TOKEN=[redacted]", "aws_secret_access_key=[redacted]", "MY_PASSWORD=[redacted]", "SSH_AUTH_SOCK=/s", "NOEQUALS"}
	if !slices.Equal(got, want) {
		t.Errorf("RedactEnv = %v, want %v", got, want)
	}
}

func TestParseProcStat(t *testing.T) {
	st, err := parseProcStat([]byte("42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10"))
	if err != nil || st.State != 'S' || st.Pgrp != 42 || st.StartTime != 987654 {
		t.Errorf("parseProcStat = %+v, %v", st, err)
	}
	if !fsx.ValidName("mx2fx7id-lmqe") || fsx.ValidName("../x") || fsx.ValidName("-a") || fsx.ValidName("") || fsx.ValidName(strings.Repeat("a", 64)) {
		t.Error("validSessionID accepts or refuses the wrong ids")
	}
}
