package diffview

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Op says what a diff line does.
type Op uint8

const (
	// Equal is a context line present in both versions.
	Equal Op = iota
	// Insert is a line only the new version has.
	Insert
	// Delete is a line only the old version has.
	Delete
)

func (o Op) String() string {
	switch o {
	case Equal:
		return "equal"
	case Insert:
		return "insert"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Marker is the unified-diff column character for the op: ' ', '+' or '-'.
func (o Op) Marker() byte {
	switch o {
	case Insert:
		return '+'
	case Delete:
		return '-'
	}
	return ' '
}

// Span is a byte range [Start,End) of a Line's Text.
type Span struct{ Start, End int }

// Line is one line of a hunk.
type Line struct {
	Op Op
	// Text is the line without its "\n" (a "\r" of a CRLF file stays).
	Text string
	// OldNo and NewNo are 1-based line numbers; 0 on the side the line is
	// absent from (NewNo of a Delete, OldNo of an Insert).
	OldNo, NewNo int
	// NoNewline marks the last line of a file that does not end in "\n"
	// (a patch follows it with "\ No newline at end of file").
	NoNewline bool
	// Changed lists the byte ranges of Text that differ from the paired
	// line on the other side (intra-line highlight). Empty means no pairing
	// or lines too different to highlight usefully: show the whole line.
	Changed []Span
}

// Hunk is a run of changes with its surrounding context.
type Hunk struct {
	// OldStart/NewStart are as printed in the "@@" header: 1-based, or the
	// number of the line before the hunk when the count is 0.
	OldStart, OldLines int
	NewStart, NewLines int
	Lines              []Line
	// Header is the "@@ -a,b +c,d @@" line.
	Header string
}

// oldOffset is the 0-based index of the first old line the hunk covers.
func (h *Hunk) oldOffset() int {
	if h.OldLines == 0 {
		return h.OldStart
	}
	return h.OldStart - 1
}

// Added and Removed count the hunk's + and - lines.
func (h *Hunk) Added() int   { return h.count(Insert) }
func (h *Hunk) Removed() int { return h.count(Delete) }

func (h *Hunk) count(op Op) int {
	n := 0
	for i := range h.Lines {
		if h.Lines[i].Op == op {
			n++
		}
	}
	return n
}

// FileDiff is the difference between two versions of one file.
type FileDiff struct {
	Hunks []Hunk
	// Binary: one side looks binary; the file was summarised, not diffed.
	Binary bool
	// TooLarge: one side exceeds Options.MaxBytes; summarised, not diffed.
	TooLarge bool
	// OldSize and NewSize are the byte sizes of both versions.
	OldSize, NewSize int
	// OldLineCount and NewLineCount are the number of lines of each version
	// (0 when not diffed).
	OldLineCount, NewLineCount int
	// OldNoNewline/NewNoNewline: the version is non-empty and its last line
	// lacks "\n".
	OldNoNewline, NewNoNewline bool
	// Added and Removed count + and - lines over all hunks.
	Added, Removed int
	// Context is the number of context lines the hunks were built with.
	Context int
}

// Summarised reports whether the file was summarised instead of diffed.
func (fd *FileDiff) Summarised() bool { return fd.Binary || fd.TooLarge }

// Identical reports whether a diffed file has no changes.
func (fd *FileDiff) Identical() bool { return !fd.Summarised() && len(fd.Hunks) == 0 }

// DefaultContext is the number of context lines around a change.
const DefaultContext = 3

// DefaultMaxBytes is the size above which a file is summarised, not diffed.
const DefaultMaxBytes = 8 << 20

// diffTimeout bounds the line diff; past it the result stays correct but
// coarser. A 10k-line file with hundreds of hunks takes milliseconds.
const diffTimeout = 2 * time.Second

// Options tune Diff.
type Options struct {
	// Context lines around each change: 0 means DefaultContext, a negative
	// value means none.
	Context int
	// MaxBytes: a version larger than this is summarised (TooLarge) unless
	// Force is set. 0 means DefaultMaxBytes.
	MaxBytes int
	// Force diffs binary and too-large files anyway.
	Force bool
}

func (o Options) context() int {
	switch {
	case o.Context == 0:
		return DefaultContext
	case o.Context < 0:
		return 0
	}
	return o.Context
}

// Diff compares two versions of a file. It never fails: binary or huge
// inputs come back summarised (Binary, TooLarge) unless opts.Force is set.
func Diff(oldText, newText string, opts Options) *FileDiff {
	fd := &FileDiff{
		OldSize: len(oldText),
		NewSize: len(newText),
		Context: opts.context(),
	}
	if !opts.Force {
		if isBinaryText(oldText) || isBinaryText(newText) {
			fd.Binary = true
			return fd
		}
		maxBytes := opts.MaxBytes
		if maxBytes <= 0 {
			maxBytes = DefaultMaxBytes
		}
		if len(oldText) > maxBytes || len(newText) > maxBytes {
			fd.TooLarge = true
			return fd
		}
	}
	a := splitLines(oldText)
	b := splitLines(newText)
	fd.OldLineCount, fd.NewLineCount = len(a), len(b)
	fd.OldNoNewline = oldText != "" && !strings.HasSuffix(oldText, "\n")
	fd.NewNoNewline = newText != "" && !strings.HasSuffix(newText, "\n")
	if oldText == newText {
		return fd
	}
	changes := diffChanges(a, b, diffTimeout)
	fd.Hunks = buildHunks(a, b, changes, fd.Context, fd.OldNoNewline, fd.NewNoNewline)
	for i := range fd.Hunks {
		fd.Added += fd.Hunks[i].Added()
		fd.Removed += fd.Hunks[i].Removed()
	}
	return fd
}

func buildHunks(a, b []string, changes []change, ctx int, oldNoNL, newNoNL bool) []Hunk {
	var hunks []Hunk
	for first := 0; first < len(changes); {
		last := first
		for last+1 < len(changes) && changes[last+1].a0-changes[last].a1 <= 2*ctx {
			last++
		}
		group := changes[first : last+1]
		first = last + 1

		a0 := max(0, group[0].a0-ctx)
		b0 := group[0].b0 - (group[0].a0 - a0)
		a1 := min(len(a), group[len(group)-1].a1+ctx)
		b1 := group[len(group)-1].b1 + (a1 - group[len(group)-1].a1)

		h := Hunk{OldLines: a1 - a0, NewLines: b1 - b0}
		h.OldStart, h.NewStart = a0, b0
		if h.OldLines > 0 {
			h.OldStart++
		}
		if h.NewLines > 0 {
			h.NewStart++
		}
		h.Header = fmt.Sprintf("@@ -%s +%s @@", rangeText(h.OldStart, h.OldLines), rangeText(h.NewStart, h.NewLines))

		lineOf := func(op Op, i, j int) Line {
			l := Line{Op: op}
			var raw string
			switch op {
			case Insert:
				raw = b[j]
				l.NewNo = j + 1
				l.NoNewline = newNoNL && j == len(b)-1
			default:
				raw = a[i]
				l.OldNo = i + 1
				l.NoNewline = oldNoNL && i == len(a)-1
				if op == Equal {
					l.NewNo = j + 1
				}
			}
			l.Text = strings.TrimSuffix(raw, "\n")
			return l
		}
		i, j := a0, b0
		for _, c := range group {
			for ; i < c.a0; i, j = i+1, j+1 {
				h.Lines = append(h.Lines, lineOf(Equal, i, j))
			}
			start := len(h.Lines)
			for ; i < c.a1; i++ {
				h.Lines = append(h.Lines, lineOf(Delete, i, j))
			}
			mid := len(h.Lines)
			for ; j < c.b1; j++ {
				h.Lines = append(h.Lines, lineOf(Insert, i, j))
			}
			highlightPairs(h.Lines[start:mid], h.Lines[mid:])
		}
		for ; i < a1; i, j = i+1, j+1 {
			h.Lines = append(h.Lines, lineOf(Equal, i, j))
		}
		hunks = append(hunks, h)
	}
	return hunks
}

// rangeText formats a hunk range the way git does: the count is left out
// when it is 1.
func rangeText(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

// binarySniffBytes bounds how much of a file IsBinary inspects (git looks at
// the first 8000 bytes for a NUL; we also judge UTF-8 validity).
const binarySniffBytes = 64 << 10

// IsBinary reports whether content looks binary: it holds a NUL byte, or
// more than a tenth of its characters are invalid UTF-8 or control bytes
// other than the usual whitespace, backspace and escape. A few Latin-1 bytes
// in otherwise ASCII text stay text. Only the first 64 KiB are inspected.
func IsBinary(b []byte) bool {
	if len(b) > binarySniffBytes {
		b = b[:binarySniffBytes]
	}
	return isBinaryText(string(b))
}

func isBinaryText(s string) bool {
	truncated := false
	if len(s) > binarySniffBytes {
		s = s[:binarySniffBytes]
		truncated = true
	}
	if strings.IndexByte(s, 0) >= 0 {
		return true
	}
	bad, total := 0, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		total++
		switch {
		case r == utf8.RuneError && size <= 1:
			// A rune cut by the sniff limit is not evidence of binary.
			if !truncated || len(s)-i >= utf8.UTFMax || utf8.FullRuneInString(s[i:]) {
				bad++
			}
		case r < 0x20 && !strings.ContainsRune("\t\n\r\f\v\b\x1b", r), r == 0x7f:
			bad++
		}
		i += size
	}
	return bad*10 > total
}
