package overlay

import (
	"fmt"
	"regexp"
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
	re      *regexp.Regexp
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
	expr, err := globToRegexp(p)
	if err != nil {
		return fmt.Errorf("ignore pattern %q: %w", raw, err)
	}
	if !anchored {
		expr = "(?:.*/)?" + expr
	}
	re, err := regexp.Compile("(?s)^" + expr + "$")
	if err != nil {
		return fmt.Errorf("ignore pattern %q: %w", raw, err)
	}
	r.re = re
	i.rules = append(i.rules, r)
	return nil
}

func globToRegexp(p string) (string, error) {
	var b strings.Builder
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
					b.WriteString(".*") // "x/**" or "**"
					k = end - 1
					continue
				case startsSeg && p[end] == '/':
					b.WriteString("(?:.*/)?") // "**/x", "a/**/b"
					k = end
					continue
				}
				b.WriteString("[^/]*")
				k = end - 1
				continue
			}
			b.WriteString("[^/]*")
		case '?':
			b.WriteString("[^/]")
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
				b.WriteString(`\[`) // no closing bracket: a literal "["
				continue
			}
			class := p[k+1 : end]
			b.WriteByte('[')
			if class[0] == '!' || class[0] == '^' {
				b.WriteString("^/")
				class = class[1:]
			}
			for _, r := range class {
				if r == '\\' || r == '[' || r == ']' || r == '^' {
					b.WriteByte('\\')
				}
				b.WriteRune(r)
			}
			b.WriteByte(']')
			k = end
		case '\\':
			if k+1 < len(p) {
				k++
				b.WriteString(regexp.QuoteMeta(p[k : k+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(p[k : k+1]))
		}
	}
	return b.String(), nil
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
		if r.negate == ignored && r.re.MatchString(path) {
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
