package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stratahq/strata/overlay"
)

// Review comments: a person comments on lines of a World's diff; the
// comments collect in the World's open round until one action sends the
// round to the World's agent as a single prompt. Everything is kept in
// worlds/<name>/review.json (written atomically under the World's lock).

// ReviewFile is the review record's name in the World's directory.
const ReviewFile = "review.json"

// Review sides: a comment is on the World's version of a file (new) or on
// lines the World removed, which only the base still has (old).
const (
	ReviewSideNew = "new"
	ReviewSideOld = "old"
)

// Limits on what a comment keeps: the quoted snippet is cut to
// maxSnippetLines lines of at most maxSnippetLine bytes (its hash covers
// the whole range), the text to maxCommentText bytes.
const (
	maxSnippetLines = 12
	maxSnippetLine  = 240
	maxCommentText  = 8 << 10
	maxRangeLines   = 5000
)

var (
	// ErrNoComments: the open round has nothing to send.
	ErrNoComments = errors.New("no review comments to send")
	// ErrCommentNotFound: no open comment has that number.
	ErrCommentNotFound = errors.New("review comment not found")
	// ErrNoTerminal: the World has no session on a terminal to send to.
	ErrNoTerminal = errors.New("world has no agent running on a terminal")
	// ErrBadAnchor: the lines commented on are not in the file.
	ErrBadAnchor = errors.New("bad review anchor")
)

// ReviewAnchor is where a comment goes: lines Start..End (1-based,
// inclusive) of Path on Side, and the hunk it was written on, if any (as
// `strata diff` numbers hunks; 0 for a line or range comment).
type ReviewAnchor struct {
	Path  string `json:"path"`
	Side  string `json:"side"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	Hunk  int    `json:"hunk,omitempty"`
}

// String is the anchor as the prompt and the CLI print it: path:line or
// path:start-end (old-side lines say so).
func (a ReviewAnchor) String() string {
	s := fmt.Sprintf("%s:%d", a.Path, a.Start)
	if a.End > a.Start {
		s += fmt.Sprintf("-%d", a.End)
	}
	if a.Side == ReviewSideOld {
		s += " (removed lines)"
	}
	return s
}

// ReviewComment is one comment of a round.
type ReviewComment struct {
	ID int `json:"id"`
	ReviewAnchor
	Text string `json:"text"`
	// Snippet is the quoted code (cut, see maxSnippetLines); SnippetHash is
	// the sha256 of the whole range as it was, FileHash the file's version
	// (FileChange.WorldHash, or BaseHash for the old side): together they
	// tell later whether the commented code changed.
	Snippet     string    `json:"snippet"`
	SnippetHash string    `json:"snippet_hash"`
	FileHash    string    `json:"file_hash"`
	Created     time.Time `json:"created"`
	// Stale is computed when the review is read, never stored: the code
	// under the anchor is no longer what was commented on. MovedTo is the
	// first line where the same code is now, when it only moved.
	Stale       bool   `json:"stale,omitempty"`
	StaleReason string `json:"stale_reason,omitempty"`
	MovedTo     int    `json:"moved_to,omitempty"`
}

// ReviewRound is a round that was sent.
type ReviewRound struct {
	N      int       `json:"round"`
	SentAt time.Time `json:"sent_at"`
	Now    bool      `json:"now,omitempty"` // sent at once, not queued for the turn's end
	// Queued: the agent was working; the prompt waits for its turn to end.
	Queued   bool            `json:"queued,omitempty"`
	Session  string          `json:"session,omitempty"`
	Prompt   string          `json:"prompt"`
	Comments []ReviewComment `json:"comments"`
}

// Review is a World's review: its open round and the rounds sent.
type Review struct {
	World string `json:"world"`
	// Round is the number the open round will be sent as.
	Round  int             `json:"round"`
	Open   []ReviewComment `json:"open"`
	Rounds []ReviewRound   `json:"rounds"`
	NextID int             `json:"next_id"`
}

// ReviewSender delivers a round's prompt to the World's agent: queued
// until the agent's turn ends unless now (it says whether it queued). Its
// shape is SendInput's; SendReviewInput picks it or SendToTerminal.
type ReviewSender func(ctx context.Context, world, text string, now bool) (queued bool, err error)

func (e *Engine) reviewPath(name string) string {
	return filepath.Join(e.Paths.World(name), ReviewFile)
}

func (e *Engine) readReview(name string) (Review, error) {
	r := Review{World: name, Round: 1, NextID: 1}
	data, err := os.ReadFile(e.reviewPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read review of %s: %w", name, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("read review of %s: %s is damaged (%w); move it away to start over", name, e.reviewPath(name), err)
	}
	r.World = name
	r.Round = max(r.Round, len(r.Rounds)+1, 1)
	r.NextID = max(r.NextID, 1)
	return r, nil
}

func (e *Engine) writeReview(r Review) error {
	for i := range r.Open {
		r.Open[i].Stale, r.Open[i].StaleReason, r.Open[i].MovedTo = false, "", 0
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := overlay.WriteFileAtomic(e.reviewPath(r.World), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("save review of %s: %w", r.World, err)
	}
	return nil
}

// reviewTexts reads the current old and new text of paths in the World's
// diff: what comments quote and are checked against.
type reviewText struct {
	old, new         string
	oldHash, newHash string
}

func (e *Engine) reviewTexts(ctx context.Context, name string, paths []string) (map[string]reviewText, error) {
	out := map[string]reviewText{}
	if len(paths) == 0 {
		return out, nil
	}
	w, err := e.World(name)
	if err != nil {
		return nil, err
	}
	cs, err := e.Changes(ctx, w, false)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	var changes []overlay.Change
	for _, c := range cs.Changes {
		if want[c.Path] {
			changes = append(changes, c)
		}
	}
	if len(changes) == 0 {
		return out, nil
	}
	fcs, err := e.Diff(ctx, name, DiffOptions{Changes: changes})
	if err != nil {
		return nil, err
	}
	for _, fc := range fcs {
		out[fc.Path] = reviewText{old: fc.OldText(), new: fc.NewText(), oldHash: fc.BaseHash, newHash: fc.WorldHash}
	}
	return out, nil
}

func (t reviewText) side(s string) (text, hash string) {
	if s == ReviewSideOld {
		return t.old, t.oldHash
	}
	return t.new, t.newHash
}

// splitLines is text's lines without their "\n".
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

func hashLines(ls []string) string {
	h := sha256.Sum256([]byte(strings.Join(ls, "\n")))
	return hex.EncodeToString(h[:])
}

// quote cuts lines for the stored snippet.
func quote(ls []string) string {
	var b strings.Builder
	for i, l := range ls {
		if i == maxSnippetLines {
			fmt.Fprintf(&b, "… (%d more lines)\n", len(ls)-i)
			break
		}
		if len(l) > maxSnippetLine {
			l = cutUTF8(l, maxSnippetLine) + "…"
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// AddReviewComment adds a comment on a's lines of the World's diff to the
// open round. The path must be one of the World's changes.
func (e *Engine) AddReviewComment(ctx context.Context, name string, a ReviewAnchor, text string) (ReviewComment, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return ReviewComment{}, fmt.Errorf("review comment on %s: the comment is empty; write what the agent should do", a)
	}
	if len(text) > maxCommentText {
		return ReviewComment{}, fmt.Errorf("review comment on %s: %d bytes is too long (at most %d)", a, len(text), maxCommentText)
	}
	if a.Side == "" {
		a.Side = ReviewSideNew
	}
	if a.Side != ReviewSideNew && a.Side != ReviewSideOld {
		return ReviewComment{}, fmt.Errorf("review comment: side %q: %w; use %q or %q", a.Side, ErrBadAnchor, ReviewSideNew, ReviewSideOld)
	}
	if a.End == 0 {
		a.End = a.Start
	}
	if a.Start < 1 || a.End < a.Start || a.End-a.Start >= maxRangeLines {
		return ReviewComment{}, fmt.Errorf("review comment on %s: lines %d-%d: %w (lines count from 1, at most %d at once)", a.Path, a.Start, a.End, ErrBadAnchor, maxRangeLines)
	}
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return ReviewComment{}, err
	}
	defer unlock()
	texts, err := e.reviewTexts(ctx, w.Name, []string{a.Path})
	if err != nil {
		return ReviewComment{}, fmt.Errorf("review comment on %s: %w", a, err)
	}
	t, ok := texts[a.Path]
	if !ok {
		return ReviewComment{}, fmt.Errorf("review comment on %s: %w: the World has no change to %s (comments go on its diff: strata diff %s)", a, ErrBadAnchor, a.Path, w.Name)
	}
	body, fileHash := t.side(a.Side)
	ls := splitLines(body)
	if a.End > len(ls) {
		which := "the World's version"
		if a.Side == ReviewSideOld {
			which = "the base"
		}
		return ReviewComment{}, fmt.Errorf("review comment on %s: %w: %s of %s has %d lines", a, ErrBadAnchor, which, a.Path, len(ls))
	}
	r, err := e.readReview(w.Name)
	if err != nil {
		return ReviewComment{}, err
	}
	code := ls[a.Start-1 : a.End]
	c := ReviewComment{
		ID: r.NextID, ReviewAnchor: a, Text: text,
		Snippet: quote(code), SnippetHash: hashLines(code), FileHash: fileHash,
		Created: time.Now().UTC(),
	}
	r.NextID++
	r.Open = append(r.Open, c)
	if err := e.writeReview(r); err != nil {
		return ReviewComment{}, err
	}
	return c, nil
}

// RemoveReviewComment drops open comment id.
func (e *Engine) RemoveReviewComment(ctx context.Context, name string, id int) error {
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	r, err := e.readReview(w.Name)
	if err != nil {
		return err
	}
	for i, c := range r.Open {
		if c.ID == id {
			r.Open = append(r.Open[:i], r.Open[i+1:]...)
			return e.writeReview(r)
		}
	}
	return fmt.Errorf("remove review comment %d of %s: %w (strata review %s lists them)", id, w.Name, ErrCommentNotFound, w.Name)
}

// Review reads the World's review, marking the open comments whose code
// changed since they were written.
func (e *Engine) Review(ctx context.Context, name string) (Review, error) {
	w, err := e.World(name)
	if err != nil {
		return Review{}, err
	}
	r, err := e.readReview(w.Name)
	if err != nil {
		return r, err
	}
	if err := e.markStale(ctx, w.Name, r.Open); err != nil {
		return r, err
	}
	return r, nil
}

func (e *Engine) markStale(ctx context.Context, name string, cs []ReviewComment) error {
	var paths []string
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen[c.Path] {
			seen[c.Path] = true
			paths = append(paths, c.Path)
		}
	}
	sort.Strings(paths)
	texts, err := e.reviewTexts(ctx, name, paths)
	if err != nil {
		return fmt.Errorf("check review comments of %s: %w", name, err)
	}
	for i := range cs {
		checkComment(&cs[i], texts)
	}
	return nil
}

// checkComment marks c stale when the code under its anchor is no longer
// the code it quoted; code that only moved is found again (MovedTo).
func checkComment(c *ReviewComment, texts map[string]reviewText) {
	t, ok := texts[c.Path]
	if !ok {
		c.Stale, c.StaleReason = true, "the World no longer changes "+c.Path
		return
	}
	body, hash := t.side(c.Side)
	if hash == c.FileHash {
		return
	}
	ls := splitLines(body)
	n := c.End - c.Start + 1
	if c.End <= len(ls) && hashLines(ls[c.Start-1:c.End]) == c.SnippetHash {
		return // the file changed elsewhere
	}
	c.Stale = true
	best := -1
	for s := 0; s+n <= len(ls); s++ {
		if hashLines(ls[s:s+n]) == c.SnippetHash {
			if best < 0 || abs(s+1-c.Start) < abs(best-c.Start) {
				best = s + 1
			}
		}
	}
	if best > 0 {
		c.MovedTo = best
		c.StaleReason = fmt.Sprintf("the code moved to line %d", best)
		return
	}
	c.StaleReason = "the code changed since this comment"
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// ReviewPrompt is round n as the agent receives it: one prompt, each
// comment with its path:line anchor, the quoted code and the text.
// Control characters of the code or the text are shown escaped, so a file
// cannot type keys into the agent's terminal.
func ReviewPrompt(n int, cs []ReviewComment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Review round %d: %s on your changes. Please address each one.\n", n, plural(len(cs), "comment", "comments"))
	for i, c := range cs {
		a := c.ReviewAnchor
		if c.MovedTo > 0 {
			a.End, a.Start = c.MovedTo+a.End-a.Start, c.MovedTo
		}
		fmt.Fprintf(&b, "\n%d. %s", i+1, a)
		if c.Hunk > 0 {
			fmt.Fprintf(&b, " (hunk %d)", c.Hunk)
		}
		if c.Stale && c.MovedTo == 0 {
			b.WriteString(" (this code has changed since the comment was written)")
		}
		b.WriteByte('\n')
		for _, l := range strings.Split(c.Snippet, "\n") {
			b.WriteString("   > " + EscapeControls(l) + "\n")
		}
		for _, l := range strings.Split(c.Text, "\n") {
			b.WriteString("   " + EscapeControls(l) + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// EscapeControls shows s's control characters (but tabs) as \xNN, for
// text from a World printed to a terminal or typed into one.
func EscapeControls(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, "\\x%02x", r)
		case r == utf8.RuneError:
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// SendReview sends the open round to the World's agent as one prompt
// through send and keeps it as a sent round. Nothing is recorded when
// delivery fails: the round stays open.
func (e *Engine) SendReview(ctx context.Context, name string, send ReviewSender, now bool) (ReviewRound, error) {
	w, unlock, err := e.lockedWorld(ctx, name)
	if err != nil {
		return ReviewRound{}, err
	}
	defer unlock()
	r, err := e.readReview(w.Name)
	if err != nil {
		return ReviewRound{}, err
	}
	if len(r.Open) == 0 {
		return ReviewRound{}, fmt.Errorf("send review round %d of %s: %w; add one with strata review %s add PATH:LINE TEXT", r.Round, w.Name, ErrNoComments, w.Name)
	}
	if err := e.markStale(ctx, w.Name, r.Open); err != nil {
		return ReviewRound{}, err
	}
	round := ReviewRound{N: r.Round, Now: now, Prompt: ReviewPrompt(r.Round, r.Open), Comments: r.Open}
	// One bracketed paste: the agent takes the lines as one prompt, and
	// the Enter the sender adds submits it.
	if round.Queued, err = send(ctx, w.Name, pasteStart+round.Prompt+pasteEnd, now); err != nil {
		return ReviewRound{}, fmt.Errorf("send review round %d of %s (the round stays open): %w", r.Round, w.Name, err)
	}
	round.SentAt = time.Now().UTC()
	r.Rounds = append(r.Rounds, round)
	r.Open = nil
	r.Round++
	if err := e.writeReview(r); err != nil {
		return round, fmt.Errorf("round %d was sent to %s, but: %w", round.N, w.Name, err)
	}
	return round, nil
}

// bracketed paste: how a prompt of several lines reaches a terminal
// program as one input; Enter then submits it.
const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// SendReviewInput sends to the World's agent session (SendInput: queued
// while it works unless now); a World without one, whose agent was
// started as a plain terminal command (strata exec --tty), gets the text
// typed on its newest live terminal (SendToTerminal).
func (e *Engine) SendReviewInput(ctx context.Context, name, text string, now bool) (bool, error) {
	queued, err := e.SendInput(ctx, name, text, now)
	if errors.Is(err, ErrNoAgent) {
		return false, e.SendToTerminal(ctx, name, text)
	}
	return queued, err
}

// SendToTerminal types text into the World's newest live terminal session,
// followed by Enter, at once.
func (e *Engine) SendToTerminal(ctx context.Context, name, text string) error {
	w, err := e.World(name)
	if err != nil {
		return err
	}
	sessions, err := ListSessions(e.Paths.World(w.Name))
	if err != nil {
		return err
	}
	var live *SessionMeta
	for i := range sessions {
		s := &sessions[i]
		if s.TTY && !s.State.Ended() && (live == nil || s.StartedAt.After(live.StartedAt)) {
			live = s
		}
	}
	if live == nil {
		return fmt.Errorf("%w: %s (start one: strata new %s --agent PRESET, or strata exec %s --tty --detach -- CMD)", ErrNoTerminal, w.Name, w.Name, w.Name)
	}
	if !strings.HasSuffix(text, "\r") && !strings.HasSuffix(text, "\n") {
		text += "\r"
	}
	if err := SendPTYInput(filepath.Join(e.Paths.Sessions(w.Name), live.ID), []byte(text)); err != nil {
		return fmt.Errorf("type into session %s of %s: %w", live.ID, w.Name, err)
	}
	return nil
}
