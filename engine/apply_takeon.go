package engine

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/stratahq/strata/diffview"
	"github.com/stratahq/strata/overlay"
)

// takeOnPublished makes the World hold the published result of every path
// whose publication was not the World's own version (a 3-way merge, a
// resolved conflict): otherwise its next apply would see the source equal to
// the new base and publish the World's old version over the merge. A path
// taken whole leaves the change set where the upper can change (no session
// runs): the World reads the source, which holds exactly that content. With
// sessions running, the content is written through the World's mounted view
// while they are paused. Only some hunks picked: the World's version gets the
// source's side merged in, and keeps its unpicked hunks.
//
// It returns the paths whose base must stay the old one because the World
// could not take the result on (it changed meanwhile, or the write failed):
// their next apply merges again instead of undoing anything. Each is a
// warning in res.
func (e *Engine) takeOnPublished(ctx context.Context, w *World, p *plan, res *ApplyResult) map[string]bool {
	keep := map[string]bool{}
	if len(p.takeOn) == 0 {
		return keep
	}
	rels := make([]string, 0, len(p.takeOn))
	for rel := range p.takeOn {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	warn := func(rel, why string) {
		keep[rel] = true
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: published, but the World keeps its own version (%s); its next apply merges again", rel, why))
		e.Log.Warn("apply: the World did not take on the published content", "world", w.Name, "path", rel, "why", why)
	}
	// The World's new content per path; drop: it equals the source.
	type change struct {
		rel  string
		v    version
		drop bool
	}
	var todo []change
	for _, rel := range rels {
		t, pub := p.takeOn[rel], p.written[rel]
		if pub.typ != overlay.TypeFile || t.world.typ != overlay.TypeFile || t.world.streamed() {
			warn(rel, "only a text file can take on a merge")
			continue
		}
		if !t.partial {
			todo = append(todo, change{rel: rel, v: pub, drop: true})
			continue
		}
		mr := diffview.Merge3(string(t.base.data), string(t.world.data), string(pub.data))
		if !mr.Clean {
			warn(rel, "its unpicked hunks overlap the source's edits")
			continue
		}
		todo = append(todo, change{rel: rel, v: version{typ: overlay.TypeFile, mode: t.world.mode, data: []byte(mr.Merged)}})
	}
	if len(todo) == 0 {
		return keep
	}
	lk, err := e.lockWorld(ctx, w.Name)
	if err != nil {
		for _, c := range todo {
			warn(c.rel, err.Error())
		}
		return keep
	}
	defer lk.Unlock()
	running := len(e.runningSessions(w)) > 0
	// unchanged checks, with the World's writers stopped, that the World
	// still holds what was captured: a newer edit is never overwritten.
	layers := w.Layers(e.Paths)
	unchanged := func(c change) bool {
		now, err := worldVersion(layers, c.rel, false)
		if err != nil || !now.same(p.takeOn[c.rel].world) {
			warn(c.rel, "it changed in the World since it was captured")
			return false
		}
		return true
	}
	switch {
	case running && !e.runtimeFor(w).HostView():
		for _, c := range todo {
			warn(c.rel, "sessions run in its sandbox; stop them and apply again to take the result on")
		}
	case running && !e.Mounted(w):
		for _, c := range todo {
			warn(c.rel, "its sessions mount the World themselves; stop them and apply again to take the result on")
		}
	case running:
		// Sessions see the mounted view: write through it, paused.
		thaw := e.pauseWorld(ctx, w)
		defer thaw()
		merged := e.Paths.MergedOf(w)
		for _, c := range todo {
			if !unchanged(c) {
				continue
			}
			if err := overlay.WriteFileBeneath(merged, c.rel, c.v.data, c.v.mode); err != nil {
				warn(c.rel, err.Error())
			}
		}
	default:
		// No session: change the upper itself, unmounted (an overlay's
		// upper must not change under its mount).
		wasMounted := e.Mounted(w)
		if err := e.unmountLocked(ctx, w); err != nil {
			for _, c := range todo {
				warn(c.rel, err.Error())
			}
			return keep
		}
		if err := e.quiesceGuest(ctx, w); err != nil {
			for _, c := range todo {
				warn(c.rel, err.Error())
			}
		} else {
			upper := e.Paths.UpperOf(w)
			for _, c := range todo {
				if !unchanged(c) {
					continue
				}
				var err error
				if c.drop {
					err = dropUpperPath(upper, c.rel)
				} else {
					err = overlay.WriteFileBeneath(upper, c.rel, c.v.data, c.v.mode)
				}
				if err != nil {
					warn(c.rel, err.Error())
				}
			}
			_ = os.Remove(e.statCachePath(w.Name))
			if err := resetWorkDir(e.Paths.WorkOf(w)); err != nil {
				e.Log.Warn("reset the World's overlay work dir", "world", w.Name, "err", err)
			}
			e.resumeGuest(ctx, w)
		}
		if wasMounted {
			if err := e.mountLocked(ctx, w); err != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("the World could not be mounted again: %v", err))
			}
		}
	}
	return keep
}
