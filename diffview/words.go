package diffview

import (
	"unicode"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// maxHighlightBytes skips intra-line highlights for very long lines (minified
// files): the word diff would cost more than it helps.
const maxHighlightBytes = 4096

// highlightPairs pairs the k-th deleted line of a change with its k-th
// inserted line and records, on both, which bytes differ.
func highlightPairs(deleted, inserted []Line) {
	for k := 0; k < len(deleted) && k < len(inserted); k++ {
		oldSpans, newSpans := WordDiff(deleted[k].Text, inserted[k].Text)
		deleted[k].Changed = oldSpans
		inserted[k].Changed = newSpans
	}
}

// WordDiff compares two versions of one line token by token (runs of letters,
// digits and '_' form words; runs of spaces are one token; anything else is a
// token of its own) and returns the byte ranges that changed on each side.
// It returns nil, nil when the lines share no word, since highlighting
// everything says nothing.
func WordDiff(oldLine, newLine string) (oldSpans, newSpans []Span) {
	if oldLine == newLine || len(oldLine) > maxHighlightBytes || len(newLine) > maxHighlightBytes {
		return nil, nil
	}
	ot := tokenize(oldLine)
	nt := tokenize(newLine)
	ids := make(map[string]rune, len(ot)+len(nt))
	toRunes := func(line string, toks []Span) []rune {
		out := make([]rune, len(toks))
		for i, t := range toks {
			s := line[t.Start:t.End]
			id, ok := ids[s]
			if !ok {
				id = runeForID(int32(len(ids)))
				ids[s] = id
			}
			out[i] = id
		}
		return out
	}
	or := toRunes(oldLine, ot)
	nr := toRunes(newLine, nt)

	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0
	diffs := dmp.DiffMainRunes(or, nr, false)

	oi, ni := 0, 0
	sharedWord := false
	for _, d := range diffs {
		n := runeCount(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			for k := 0; k < n; k++ {
				if isWordToken(oldLine[ot[oi+k].Start:ot[oi+k].End]) {
					sharedWord = true
				}
			}
			oi += n
			ni += n
		case diffmatchpatch.DiffDelete:
			oldSpans = addSpan(oldSpans, Span{ot[oi].Start, ot[oi+n-1].End})
			oi += n
		case diffmatchpatch.DiffInsert:
			newSpans = addSpan(newSpans, Span{nt[ni].Start, nt[ni+n-1].End})
			ni += n
		}
	}
	if !sharedWord {
		return nil, nil
	}
	return oldSpans, newSpans
}

func addSpan(spans []Span, s Span) []Span {
	if n := len(spans); n > 0 && spans[n-1].End == s.Start {
		spans[n-1].End = s.End
		return spans
	}
	return append(spans, s)
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isWordToken(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}

func tokenize(s string) []Span {
	var toks []Span
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		j := i + size
		switch {
		case isWordRune(r):
			for j < len(s) {
				r2, n := utf8.DecodeRuneInString(s[j:])
				if !isWordRune(r2) {
					break
				}
				j += n
			}
		case r == ' ' || r == '\t':
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
		}
		toks = append(toks, Span{i, j})
		i = j
	}
	return toks
}
