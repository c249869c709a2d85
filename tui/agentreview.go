package tui

import (
	"context"
	"fmt"
	"strings"

	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/keymap"
	"github.com/stratahq/strata/panes"
)

// Review comments in the Diff pane: the pane asks (CommentReqMsg,
// CommentRemoveMsg, the send action), the root asks the person for the
// text in a dialog and does the engine calls in tea.Cmds.

type (
	addCommentReq struct {
		world  string
		anchor engine.ReviewAnchor
		text   string
	}
	sendReviewReq struct {
		world string
		now   bool
	}
	commentsLoadedMsg struct {
		world, path string
		comments    []panes.DiffComment
		open, round int
		err         error
		info        string // what was just done, for the status line
	}
	reviewSentMsg struct {
		world string
		round engine.ReviewRound
		err   error
	}
)

// reviewUpdate handles the review messages; ok false for any other.
func (m Model) reviewUpdate(msg tea.Msg) (tea.Model, tea.Cmd, bool) {
	switch msg := msg.(type) {
	case panes.CommentReqMsg:
		a := engine.ReviewAnchor{Path: msg.Path, Side: msg.Side, Start: msg.Start, End: msg.End, Hunk: msg.Hunk}
		title := "Comment on " + a.String()
		if msg.Hunk > 0 {
			title += fmt.Sprintf(" (hunk %d)", msg.Hunk)
		}
		var body []string
		for i, l := range msg.Quote {
			if i == 6 {
				body = append(body, "  … "+panes.Count(len(msg.Quote)-i, "more line", "more lines"))
				break
			}
			body = append(body, "> "+engine.EscapeControls(l))
		}
		world := msg.World
		d := panes.NewPrompt(m.env, title, "comment (goes into the review round sent to the agent)", "", nil,
			func(s string) tea.Msg { return addCommentReq{world: world, anchor: a, text: s} })
		d.Body = body
		m.push(dialogModal{d})
		return m, nil, true
	case addCommentReq:
		if strings.TrimSpace(msg.text) == "" {
			m.setResult("empty comment: nothing added", nil)
			return m, nil, true
		}
		return m, addComment(m.ctx, m.eng, msg, m.diff.File().Path), true
	case panes.CommentRemoveMsg:
		return m, removeComment(m.ctx, m.eng, msg.World, msg.ID, m.diff.File().Path), true
	case commentsLoadedMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, nil, true
		}
		if msg.info != "" {
			m.setResult(msg.info, nil)
		}
		m.diff = m.diff.SetComments(msg.world, msg.path, msg.comments)
		return m, nil, true
	case panes.ActionMsg:
		if msg.Action != keymap.DiffSendReview {
			return m, nil, false
		}
		return m, confirmSendReview(m.ctx, m.eng, msg.World), true
	case reviewConfirmMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, nil, true
		}
		if msg.open == 0 {
			m.setResult("no review comments for "+msg.world+": "+m.env.Keys.Binding(keymap.DiffComment).Help().Key+" on a line, a range or a hunk writes one", nil)
			return m, nil, true
		}
		body := []string{
			fmt.Sprintf("%s go to %s's agent as one prompt (\"Review round %d:\"), each with its path:line and the quoted code.", panes.Count(msg.open, "comment", "comments"), msg.world, msg.round),
			"A working agent gets it when its turn ends.",
		}
		if msg.stale > 0 {
			body = append(body, fmt.Sprintf("%s stale: the code changed since; they are sent marked so.", panes.Count(msg.stale, "comment is", "comments are")))
		}
		d := panes.NewConfirm(m.env, fmt.Sprintf("Send review round %d to %s?", msg.round, msg.world), body, false, sendReviewReq{world: msg.world})
		m.push(dialogModal{d})
		return m, nil, true
	case sendReviewReq:
		return m, sendReview(m.ctx, m.eng, msg), true
	case reviewSentMsg:
		if msg.err != nil {
			m.setResult("", msg.err)
			return m, nil, true
		}
		how := "sent to"
		if msg.round.Queued {
			how = "queued for the end of the turn of"
		}
		m.setResult(fmt.Sprintf("review round %d (%s) %s %s's agent", msg.round.N, panes.Count(len(msg.round.Comments), "comment", "comments"), how, msg.world), nil)
		return m, loadComments(m.ctx, m.eng, msg.world, m.diff.File().Path, ""), true
	}
	return m, nil, false
}

type reviewConfirmMsg struct {
	world              string
	open, stale, round int
	err                error
}

func confirmSendReview(ctx context.Context, eng *engine.Engine, world string) tea.Cmd {
	return func() tea.Msg {
		r, err := eng.Review(ctx, world)
		if err != nil {
			return reviewConfirmMsg{world: world, err: err}
		}
		out := reviewConfirmMsg{world: world, open: len(r.Open), round: r.Round}
		for _, c := range r.Open {
			if c.Stale {
				out.stale++
			}
		}
		return out
	}
}

// loadComments reads the World's open comments on path.
func loadComments(ctx context.Context, eng *engine.Engine, world, path, info string) tea.Cmd {
	if eng == nil || world == "" || path == "" {
		return nil
	}
	return func() tea.Msg {
		r, err := eng.Review(ctx, world)
		if err != nil {
			return commentsLoadedMsg{world: world, path: path, err: err}
		}
		out := commentsLoadedMsg{world: world, path: path, open: len(r.Open), round: r.Round, info: info}
		for _, c := range r.Open {
			if c.Path != path {
				continue
			}
			start, end := c.Start, c.End
			if c.MovedTo > 0 {
				start, end = c.MovedTo, c.MovedTo+c.End-c.Start
			}
			out.comments = append(out.comments, panes.DiffComment{ID: c.ID, Side: c.Side, Start: start, End: end, Text: c.Text, Stale: c.Stale, Note: c.StaleReason})
		}
		return out
	}
}

func addComment(ctx context.Context, eng *engine.Engine, r addCommentReq, path string) tea.Cmd {
	return func() tea.Msg {
		c, err := eng.AddReviewComment(ctx, r.world, r.anchor, r.text)
		if err != nil {
			return commentsLoadedMsg{world: r.world, err: err}
		}
		return loadComments(ctx, eng, r.world, path, fmt.Sprintf("comment %d on %s added to %s's review round", c.ID, c.ReviewAnchor, r.world))()
	}
}

func removeComment(ctx context.Context, eng *engine.Engine, world string, id int, path string) tea.Cmd {
	return func() tea.Msg {
		if err := eng.RemoveReviewComment(ctx, world, id); err != nil {
			return commentsLoadedMsg{world: world, err: err}
		}
		return loadComments(ctx, eng, world, path, fmt.Sprintf("comment %d removed", id))()
	}
}

func sendReview(ctx context.Context, eng *engine.Engine, r sendReviewReq) tea.Cmd {
	return func() tea.Msg {
		round, err := eng.SendReview(ctx, r.world, eng.SendReviewInput, r.now)
		return reviewSentMsg{world: r.world, round: round, err: err}
	}
}
