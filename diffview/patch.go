package diffview

import (
	"fmt"
	"io/fs"
	"strings"
)

// Git file modes as they appear in patch headers.
const (
	ModeFile       uint32 = 0o100644
	ModeExecutable uint32 = 0o100755
	ModeSymlink    uint32 = 0o120000
)

// GitMode maps a file mode to the mode git records: symlink, executable or
// regular file.
func GitMode(m fs.FileMode) uint32 {
	switch {
	case m&fs.ModeSymlink != 0:
		return ModeSymlink
	case m&0o111 != 0:
		return ModeExecutable
	}
	return ModeFile
}

// PatchFile is one file's entry in a unified patch.
type PatchFile struct {
	// OldPath and NewPath are slash-separated paths relative to the tree
	// root, without the a/ and b/ prefixes. They differ for a rename.
	OldPath, NewPath string
	// OldMode and NewMode are git modes (ModeFile, ModeExecutable,
	// ModeSymlink); 0 on the side where the file does not exist (a new or a
	// deleted file). A symlink's content is its target, diffed as text (the
	// target has no trailing newline). A change between a symlink and a file
	// must be written as two PatchFiles, a deletion then an addition, as git
	// does.
	OldMode, NewMode uint32
	// Diff is the content change; nil for a mode-only change or rename.
	// Summarised diffs (binary or too large) are written as
	// "Binary files a/x and b/x differ", which `git apply` refuses for
	// anything but empty files: diff with Options.Force for patches of large
	// text files.
	Diff *FileDiff
	// HunkLabels, when set, follow each hunk's "@@ ... @@" header (git's
	// section-heading slot, which git apply and patch ignore): `strata diff`
	// writes the numbers `strata apply --hunks` takes there.
	HunkLabels []string
}

// UnifiedPatch writes p in git's extended unified format, which
// `git apply` (and `patch -p1` for text changes) accepts. It returns "" when
// p changes nothing.
func UnifiedPatch(p PatchFile) string {
	oldPath, newPath := p.OldPath, p.NewPath
	if oldPath == "" {
		oldPath = newPath
	}
	if newPath == "" {
		newPath = oldPath
	}
	fd := p.Diff
	if p.OldMode == p.NewMode && oldPath == newPath && (fd == nil || fd.Identical()) {
		// Nothing changed: a bare "diff --git" header would make git apply
		// fail on the entry after it.
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "diff --git %s %s\n", QuotePath("a/"+oldPath), QuotePath("b/"+newPath))
	switch {
	case p.OldMode == 0 && p.NewMode != 0:
		fmt.Fprintf(&b, "new file mode %06o\n", p.NewMode)
	case p.NewMode == 0 && p.OldMode != 0:
		fmt.Fprintf(&b, "deleted file mode %06o\n", p.OldMode)
	case p.OldMode != p.NewMode:
		fmt.Fprintf(&b, "old mode %06o\nnew mode %06o\n", p.OldMode, p.NewMode)
	}
	if oldPath != newPath {
		fmt.Fprintf(&b, "rename from %s\nrename to %s\n", QuotePath(oldPath), QuotePath(newPath))
	}
	if fd == nil || (!fd.Summarised() && len(fd.Hunks) == 0) {
		return b.String()
	}
	from, to := "a/"+oldPath, "b/"+newPath
	if p.OldMode == 0 && p.NewMode != 0 {
		from = "/dev/null"
	}
	if p.NewMode == 0 && p.OldMode != 0 {
		to = "/dev/null"
	}
	if fd.Summarised() {
		fmt.Fprintf(&b, "Binary files %s and %s differ\n", quoteIfNeeded(from), quoteIfNeeded(to))
		return b.String()
	}
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", patchName(from), patchName(to))
	for hi := range fd.Hunks {
		h := &fd.Hunks[hi]
		b.WriteString(h.Header)
		if hi < len(p.HunkLabels) && p.HunkLabels[hi] != "" {
			b.WriteByte(' ')
			b.WriteString(p.HunkLabels[hi])
		}
		b.WriteByte('\n')
		for k := range h.Lines {
			l := &h.Lines[k]
			b.WriteByte(l.Op.Marker())
			b.WriteString(l.Text)
			b.WriteByte('\n')
			if l.NoNewline {
				b.WriteString("\\ No newline at end of file\n")
			}
		}
	}
	return b.String()
}

func quoteIfNeeded(name string) string {
	if name == "/dev/null" {
		return name
	}
	return QuotePath(name)
}

// patchName formats a ---/+++ name: quoted when needed and, as git does,
// followed by a tab when it holds a space so tools can tell where it ends.
func patchName(name string) string {
	q := quoteIfNeeded(name)
	if q == name && strings.Contains(name, " ") {
		return name + "\t"
	}
	return q
}

// QuotePath quotes a path the way git does (quote_c_style with
// core.quotePath on): when it holds a control byte, '"', '\\', DEL or any
// byte >= 0x80, it is wrapped in double quotes with C escapes (\t, \n, \",
// \\, octal \ooo for the rest); otherwise it is returned as is.
func QuotePath(p string) string {
	needs := false
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			needs = true
			break
		}
	}
	if !needs {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
