package overlay

import (
	"fmt"
	"strings"
)

// Ignore is an ordered list of gitignore-style patterns. The last pattern
// that matches a path decides; a "!" pattern re-includes. Anything under an
// ignored directory is ignored, as in git.
type Ignore struct {
	rules []ignoreRule
}

type ignoreRule struct {
	pattern string
	negate  bool
	dirOnly bool
	glob    []globTok
}

// DefaultIgnore ignores .git directories at any depth: git inside a World
// copies .git up, and it is never part of a change to review.
func DefaultIgnore() *Ignore {
	i, err := NewIgnore(".git/")
	if err != nil {
		panic(err) // a constant pattern
	}
	return i
}

// NewIgnore compiles gitignore-style patterns: "*" and "?" never match "/",
// "**" spans directories ("**/x", "x/**", "a/**/b"), "[...]" classes (with
// "!" or "^" to negate), a leading "/" or any inner "/" anchors the pattern
// to the root, a trailing "/" matches directories only, a leading "!"
// negates, "#" starts a comment, and "\" escapes the next character.
func NewIgnore(patterns ...string) (*Ignore, error) {
	i := &Ignore{}
	for _, p := range patterns {
		if err := i.add(p); err != nil {
			return nil, err
		}
	}
	return i, nil
}

func (i *Ignore) add(raw string) error {
	p := strings.TrimRight(raw, " \t\r")
	if strings.HasSuffix(raw, "\\ ") {
		p = strings.TrimRight(raw, "\t\r")
	}
	if p == "" || strings.HasPrefix(p, "#") {
		return nil
	}
	r := ignoreRule{pattern: raw}
	if strings.HasPrefix(p, "!") {
		r.negate, p = true, p[1:]
	}
	if strings.HasPrefix(p, `\`) && len(p) > 1 && (p[1] == '!' || p[1] == '#') {
		p = p[1:]
	}
	if strings.HasSuffix(p, "/") && !strings.HasSuffix(p, `\/`) {
		r.dirOnly, p = true, strings.TrimRight(p, "/")
	}
	if p == "" {
		return fmt.Errorf("ignore pattern %q: empty", raw)
	}
	anchored := strings.Contains(p, "/")
	p = strings.TrimPrefix(p, "/")
	r.glob = compileGlob(p)
	if !anchored {
		r.glob = append([]globTok{{kind: globAnyDirs}}, r.glob...)
	}
	i.rules = append(i.rules, r)
	return nil
}

// globTok is one element of a compiled pattern. Matching works on bytes, so
// names that are not UTF-8 match like any other.
type globTok struct {
	kind  globKind
	lit   byte
	neg   bool
	class []byte // pairs of inclusive byte ranges
}

type globKind uint8

const (
	globLit     globKind = iota
	globOne              // ?: one byte but "/"
	globStar             // *: a run without "/"
	globAnyDirs          // "**/": zero or more whole segments
	globAll              // trailing "/**" or a lone "**": anything
	globClass            // [...]
)

func compileGlob(p string) []globTok {
	var toks []globTok
	for k := 0; k < len(p); k++ {
		c := p[k]
		switch c {
		case '*':
			if k+1 < len(p) && p[k+1] == '*' {
				startsSeg := k == 0 || p[k-1] == '/'
				end := k + 2
				for end < len(p) && p[end] == '*' {
					end++
				}
				switch {
				case startsSeg && end == len(p):
					toks = append(toks, globTok{kind: globAll})
					k = end - 1
					continue
				case startsSeg && p[end] == '/':
					toks = append(toks, globTok{kind: globAnyDirs})
					k = end
					continue
				}
				k = end - 1 // other runs of stars are one star
			}
			toks = append(toks, globTok{kind: globStar})
		case '?':
			toks = append(toks, globTok{kind: globOne})
		case '[':
			end := k + 1
			if end < len(p) && (p[end] == '!' || p[end] == '^') {
				end++
			}
			if end < len(p) && p[end] == ']' {
				end++
			}
			for end < len(p) && p[end] != ']' {
				end++
			}
			if end >= len(p) {
				toks = append(toks, globTok{kind: globLit, lit: '['}) // no closing bracket
				continue
			}
			body := p[k+1 : end]
			t := globTok{kind: globClass}
			if body[0] == '!' || body[0] == '^' {
				t.neg, body = true, body[1:]
			}
			for j := 0; j < len(body); j++ {
				lo := body[j]
				if lo == '\\' && j+1 < len(body) {
					j++
					lo = body[j]
				}
				hi := lo
				if j+2 < len(body) && body[j+1] == '-' {
					hi = body[j+2]
					j += 2
				}
				t.class = append(t.class, lo, hi)
			}
			toks = append(toks, t)
			k = end
		case '\\':
			if k+1 < len(p) {
				k++
				toks = append(toks, globTok{kind: globLit, lit: p[k]})
			}
		default:
			toks = append(toks, globTok{kind: globLit, lit: c})
		}
	}
	return toks
}

func (t globTok) inClass(b byte) bool {
	in := false
	for j := 0; j+1 < len(t.class); j += 2 {
		if b >= t.class[j] && b <= t.class[j+1] {
			in = true
			break
		}
	}
	return in != t.neg
}

func globMatch(toks []globTok, s string) bool {
	for len(toks) > 0 {
		t := toks[0]
		switch t.kind {
		case globLit:
			if s == "" || s[0] != t.lit {
				return false
			}
		case globOne:
			if s == "" || s[0] == '/' {
				return false
			}
		case globClass:
			if s == "" || s[0] == '/' || !t.inClass(s[0]) {
				return false
			}
		case globStar:
			for i := 0; ; i++ {
				if globMatch(toks[1:], s[i:]) {
					return true
				}
				if i == len(s) || s[i] == '/' {
					return false
				}
			}
		case globAll:
			for i := 0; i <= len(s); i++ {
				if globMatch(toks[1:], s[i:]) {
					return true
				}
			}
			return false
		case globAnyDirs:
			if globMatch(toks[1:], s) {
				return true
			}
			for i := 0; i < len(s); i++ {
				if s[i] == '/' && globMatch(toks[1:], s[i+1:]) {
					return true
				}
			}
			return false
		}
		toks, s = toks[1:], s[1:]
	}
	return s == ""
}

// Match reports whether path (slash-separated, relative to the root) is
// ignored; isDir says whether path is a directory. A path under an ignored
// directory is ignored whatever later patterns say.
func (i *Ignore) Match(path string, isDir bool) bool {
	if i == nil || len(i.rules) == 0 {
		return false
	}
	path = strings.Trim(path, "/")
	for k := 0; k < len(path); k++ {
		if path[k] == '/' && i.matchOne(path[:k], true) {
			return true
		}
	}
	return i.matchOne(path, isDir)
}

func (i *Ignore) matchOne(path string, isDir bool) bool {
	ignored := false
	for _, r := range i.rules {
		if r.dirOnly && !isDir {
			continue
		}
		if r.negate == ignored && globMatch(r.glob, path) {
			ignored = !r.negate
		}
	}
	return ignored
}

// Patterns returns the patterns the Ignore was built from.
func (i *Ignore) Patterns() []string {
	if i == nil {
		return nil
	}
	out := make([]string, len(i.rules))
	for k, r := range i.rules {
		out[k] = r.pattern
	}
	return out
}
