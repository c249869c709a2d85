package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// plainText turns terminal output into text a person can read in a pager or
// a file: escape sequences (CSI, OSC, DCS, APC, PM, SOS and two-byte ESC
// sequences) and control characters other than newline and tab are dropped,
// "\r\n" (and "\r\r\n") becomes "\n" and a lone "\r" (a redrawn progress line) a newline.
// It is a state machine over bytes, so a sequence split across two
// transcript records is still recognised; UTF-8 passes through untouched.
type plainText struct {
	w     io.Writer
	state int
	cr    bool // a "\r" is pending: a newline unless "\n" follows
}

const (
	ptText   = iota
	ptEsc    // after ESC
	ptCSI    // ESC [ ... final byte 0x40-0x7e
	ptString // OSC/DCS/APC/PM/SOS body, up to BEL or ESC \
	ptStrEsc // ESC inside a string: "\" ends it
	ptEscInt // ESC followed by intermediate bytes (0x20-0x2f), up to a final byte
)

func (p *plainText) Write(b []byte) (int, error) {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		switch p.state {
		case ptText:
			// "\r\r\n" is a "\r\n" the terminal's onlcr made of "\r\n".
			if p.cr && c != '\n' && c != '\r' {
				out = append(out, '\n')
			}
			p.cr = false
			switch {
			case c == 0x1b:
				p.state = ptEsc
			case c == '\r':
				p.cr = true
			case c == '\n' || c == '\t' || c >= 0x20 && c != 0x7f:
				out = append(out, c)
			}
		case ptEsc:
			switch {
			case c == '[':
				p.state = ptCSI
			case c == ']' || c == 'P' || c == '_' || c == '^' || c == 'X':
				p.state = ptString
			case c >= 0x20 && c <= 0x2f:
				p.state = ptEscInt
			default:
				p.state = ptText
			}
		case ptCSI:
			if c >= 0x40 && c <= 0x7e {
				p.state = ptText
			}
		case ptString:
			switch c {
			case 0x07:
				p.state = ptText
			case 0x1b:
				p.state = ptStrEsc
			}
		case ptStrEsc:
			if c == '\\' {
				p.state = ptText
			} else {
				p.state = ptString
			}
		case ptEscInt:
			if c >= 0x30 && c <= 0x7e {
				p.state = ptText
			}
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close writes the newline of a pending "\r".
func (p *plainText) Close() error {
	if p.cr {
		p.cr = false
		_, err := p.w.Write([]byte{'\n'})
		return err
	}
	return nil
}

// isTerminal reports whether w is a terminal (not a pipe or a file).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
