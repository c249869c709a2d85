package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stratahq/strata/engine"
)

// cmdReview: strata review W [add PATH:LINE[-LINE] TEXT... | rm N | send].
func cmdReview(a *app, in *input) error {
	name, rest := in.pos[0], in.pos[1:]
	asJSON, rounds, now, old := *in.Bool("json"), *in.Bool("rounds"), *in.Bool("now"), *in.Bool("old")
	action := ""
	if len(rest) > 0 {
		action, rest = rest[0], rest[1:]
	}
	switch action {
	case "", "ls", "list":
		if len(rest) > 0 {
			return usagef("strata review %s: unexpected %q (strata review --help)", name, rest[0])
		}
		r, err := a.eng.Review(a.ctx, name)
		if err != nil {
			return err
		}
		if rounds {
			if asJSON {
				if r.Rounds == nil {
					r.Rounds = []engine.ReviewRound{}
				}
				return a.printJSON(r.Rounds)
			}
			printRounds(a, r)
			return nil
		}
		if asJSON {
			if r.Open == nil {
				r.Open = []engine.ReviewComment{}
			}
			return a.printJSON(r)
		}
		printOpen(a, r)
		return nil
	case "add":
		if len(rest) < 2 {
			return usagef("strata review %s add: want PATH:LINE[-LINE] TEXT (e.g. review %s add src/x.go:12-14 'use a constant')", name, name)
		}
		anchor, err := parseAnchor(rest[0])
		if err != nil {
			return err
		}
		if old {
			anchor.Side = engine.ReviewSideOld
		}
		c, err := a.eng.AddReviewComment(a.ctx, name, anchor, strings.Join(rest[1:], " "))
		if err != nil {
			return err
		}
		if asJSON {
			return a.printJSON(c)
		}
		fmt.Fprintf(a.stdout, "comment %d on %s\n", c.ID, c.ReviewAnchor)
		return nil
	case "rm":
		if len(rest) != 1 {
			return usagef("strata review %s rm: want the comment's number (strata review %s lists them)", name, name)
		}
		id, err := strconv.Atoi(rest[0])
		if err != nil || id < 1 {
			return usagef("strata review %s rm: %q is not a comment number", name, rest[0])
		}
		return a.eng.RemoveReviewComment(a.ctx, name, id)
	case "send":
		if len(rest) > 0 {
			return usagef("strata review %s send: unexpected %q", name, rest[0])
		}
		round, err := a.eng.SendReview(a.ctx, name, a.eng.SendReviewInput, now)
		if err != nil {
			return err
		}
		if asJSON {
			return a.printJSON(round)
		}
		how := "sent"
		if round.Queued {
			how = "queued (the agent is working; it gets it when its turn ends)"
		}
		fmt.Fprintf(a.stdout, "review round %d (%s) %s to %s\n", round.N, count(len(round.Comments), "comment", "comments"), how, name)
		return nil
	}
	return usagef("strata review %s: unknown action %q; use add, rm or send (or none to list)", name, action)
}

// parseAnchor reads PATH:LINE or PATH:START-END (the last colon splits, so
// a path may hold colons).
func parseAnchor(s string) (engine.ReviewAnchor, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return engine.ReviewAnchor{}, usagef("strata review: %q is not PATH:LINE or PATH:START-END", s)
	}
	a := engine.ReviewAnchor{Path: s[:i], Side: engine.ReviewSideNew}
	lo, hi, ok := strings.Cut(s[i+1:], "-")
	var err error
	if a.Start, err = strconv.Atoi(lo); err != nil || a.Start < 1 {
		return a, usagef("strata review: %q: line %q is not a number from 1", s, lo)
	}
	a.End = a.Start
	if ok {
		if a.End, err = strconv.Atoi(hi); err != nil || a.End < a.Start {
			return a, usagef("strata review: %q: the range must end at or after line %d", s, a.Start)
		}
	}
	return a, nil
}

func printOpen(a *app, r engine.Review) {
	if len(r.Open) == 0 {
		fmt.Fprintf(a.stdout, "no open comments for %s (round %d); add one: strata review %s add PATH:LINE TEXT\n", r.World, r.Round, r.World)
		return
	}
	fmt.Fprintf(a.stdout, "review round %d of %s: %s (strata review %s send)\n", r.Round, r.World, count(len(r.Open), "comment", "comments"), r.World)
	for _, c := range r.Open {
		mark := ""
		if c.Stale {
			mark = "  [stale: " + c.StaleReason + "]"
		}
		fmt.Fprintf(a.stdout, "\n%3d  %s%s\n", c.ID, c.ReviewAnchor, mark)
		for _, l := range strings.Split(c.Snippet, "\n") {
			fmt.Fprintf(a.stdout, "     > %s\n", engine.EscapeControls(l))
		}
		for _, l := range strings.Split(c.Text, "\n") {
			fmt.Fprintf(a.stdout, "     %s\n", engine.EscapeControls(l))
		}
	}
}

func printRounds(a *app, r engine.Review) {
	if len(r.Rounds) == 0 {
		fmt.Fprintf(a.stdout, "no review rounds sent to %s yet\n", r.World)
		return
	}
	for _, rd := range r.Rounds {
		fmt.Fprintf(a.stdout, "round %d  %s  %s\n", rd.N, rd.SentAt.Local().Format("2006-01-02 15:04:05"), count(len(rd.Comments), "comment", "comments"))
	}
}
