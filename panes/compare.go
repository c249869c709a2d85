package panes

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/keymap"
	tea "github.com/stratahq/strata/third_party/bubbletea"
)

// CompareVersion is one version of a path and the Worlds holding it.
type CompareVersion struct {
	Worlds []string
	Type   string // file, dir, symlink, other; "absent" when deleted
	Size   int64
	Source bool // what the source holds now
}

// ComparePath is one path changed in at least one compared World.
type ComparePath struct {
	Path      string
	ChangedBy []string
	Agree     bool
	Versions  []CompareVersion
}

// FanOutRow is one World's result in a fan-out.
type FanOutRow struct {
	World    string
	ExitCode int
	Signal   string
	Duration string
	Changed  int // paths the run changed; -1 when unknown
	Error    string
	Running  bool
}

// FanOut is the last command run in several Worlds at once.
type FanOut struct {
	Command string
	At      time.Time // shown as is: the root passes local time
	Rows    []FanOutRow
}

// CompareApplyMsg asks to publish, per World, the paths adopted from it.
type CompareApplyMsg struct{ Picks map[string][]string }

// CompareRemoveMsg asks to remove the Worlds no path was adopted from.
type CompareRemoveMsg struct{ Worlds []string }

// CompareClosedMsg says the compare view closed.
type CompareClosedMsg struct{}

// Compare lines Worlds up side by side: the last fan-out's results, then
// per changed path which version each World holds, and the choice of the
// World whose version to adopt.
type Compare struct {
	env    *Env
	Worlds []string
	Source string
	FanOut *FanOut
	paths  []ComparePath
	list   cursorList
	col    int
	chosen map[string]string // path -> World adopted
	height int
	Err    string
}

// NewCompare opens the view on a comparison of worlds.
func NewCompare(env *Env, worlds []string, source string, paths []ComparePath, fo *FanOut) Compare {
	return Compare{env: env, Worlds: worlds, Source: source, paths: paths, FanOut: fo, chosen: map[string]string{}, height: 10}
}

// SetPaths replaces the comparison (after an apply), keeping choices of
// paths still listed.
func (c Compare) SetPaths(worlds []string, paths []ComparePath, fo *FanOut) Compare {
	c.Worlds, c.paths, c.FanOut = worlds, paths, fo
	live := map[string]bool{}
	for _, p := range paths {
		live[p.Path] = true
	}
	chosen := map[string]string{}
	for p, w := range c.chosen {
		if live[p] {
			chosen[p] = w
		}
	}
	c.chosen = chosen
	c.col = min(c.col, max(len(worlds)-1, 0))
	c.list.to(c.list.Cursor, len(paths))
	return c
}

// Paths are the compared paths.
func (c Compare) Paths() []ComparePath { return c.paths }

// Chosen is the World adopted for path ("" when none).
func (c Compare) Chosen(path string) string { return c.chosen[path] }

// Cursor is the path and World under the cursor.
func (c Compare) Cursor() (path, world string) {
	if c.list.Cursor < len(c.paths) {
		path = c.paths[c.list.Cursor].Path
	}
	if c.col < len(c.Worlds) {
		world = c.Worlds[c.col]
	}
	return path, world
}

// Update handles a key.
func (c Compare) Update(msg tea.Msg) (Compare, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		if a, ok := c.env.Keys.Match(keymap.Compare, k); ok {
			return c.Do(a)
		}
	}
	return c, nil
}

// Do performs one action of the compare area.
func (c Compare) Do(a string) (Compare, tea.Cmd) {
	c.Err = ""
	switch a {
	case keymap.CompareUp:
		c.list.move(-1, len(c.paths))
	case keymap.CompareDown:
		c.list.move(1, len(c.paths))
	case keymap.CompareLeft:
		c.col = max(c.col-1, 0)
	case keymap.CompareRight:
		c.col = min(c.col+1, max(len(c.Worlds)-1, 0))
	case keymap.CompareAdopt:
		path, world := c.Cursor()
		if path == "" || world == "" {
			return c, nil
		}
		if c.chosen[path] == world {
			delete(c.chosen, path)
			return c, nil
		}
		p := c.paths[c.list.Cursor]
		if !contains(p.ChangedBy, world) {
			c.Err = world + " did not change " + path + ": it holds the source's version already"
			return c, nil
		}
		c.chosen[path] = world
	case keymap.CompareApply:
		if len(c.chosen) == 0 {
			c.Err = "nothing adopted: " + c.env.Keys.Binding(keymap.CompareAdopt).Help().Key + " adopts the version of the World under the cursor"
			return c, nil
		}
		picks := map[string][]string{}
		for p, w := range c.chosen {
			picks[w] = append(picks[w], p)
		}
		for _, ps := range picks {
			sort.Strings(ps)
		}
		return c, func() tea.Msg { return CompareApplyMsg{Picks: picks} }
	case keymap.CompareRemove:
		if len(c.chosen) == 0 {
			c.Err = "adopt a World's version first: the Worlds not chosen are the ones removed"
			return c, nil
		}
		others := c.NotChosen()
		if len(others) == 0 {
			c.Err = "every World was chosen for some path: none to remove"
			return c, nil
		}
		return c, func() tea.Msg { return CompareRemoveMsg{Worlds: others} }
	case keymap.CompareCancel:
		return c, func() tea.Msg { return CompareClosedMsg{} }
	}
	return c, nil
}

// NotChosen are the compared Worlds no path was adopted from.
func (c Compare) NotChosen() []string {
	used := map[string]bool{}
	for _, w := range c.chosen {
		used[w] = true
	}
	var out []string
	for _, w := range c.Worlds {
		if !used[w] {
			out = append(out, w)
		}
	}
	return out
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// cell is what the table shows of path p in world w.
func (c Compare) cell(p ComparePath, w string) string {
	if !contains(p.ChangedBy, w) {
		return "—"
	}
	for i, v := range p.Versions {
		if !contains(v.Worlds, w) {
			continue
		}
		s := string(rune('A' + i%26))
		switch v.Type {
		case "absent":
			s += " deleted"
		case "file":
			s += " " + fsx.HumanBytes(v.Size)
		default:
			s += " " + v.Type
		}
		return s
	}
	return "?"
}

// View draws the view in width x height cells.
func (c Compare) View(width, height int) string {
	st := c.env.Styles
	if height <= 0 {
		return ""
	}
	differ := 0
	for _, p := range c.paths {
		if !p.Agree {
			differ++
		}
	}
	lines := []string{
		st.Bold.Render(strings.Join(c.Worlds, " · ")) + st.Muted.Render(" over "+c.Source),
		st.Muted.Render(Count(len(c.paths), "changed path", "changed paths")+": ") + st.Warning.Render(fmt.Sprintf("%d differ", differ)) +
			st.Muted.Render(fmt.Sprintf(", %d agree · %d adopted", len(c.paths)-differ, len(c.chosen))),
	}
	if fo := c.FanOut; fo != nil {
		lines = append(lines, "", st.Accent.Render("last fan-out")+st.Muted.Render(" "+fo.At.Format("15:04:05")+": ")+fo.Command)
		for _, r := range fo.Rows {
			status := fmt.Sprintf("exit %d", r.ExitCode)
			ss := st.StatusStyle("done")
			switch {
			case r.Running:
				status, ss = "running", st.StatusStyle("running")
			case r.Error != "":
				status, ss = "error: "+r.Error, st.StatusStyle("failed")
			case r.Signal != "":
				status, ss = r.Signal, st.StatusStyle("failed")
			case r.ExitCode != 0:
				ss = st.StatusStyle("failed")
			}
			changed := "paths changed: ?"
			if r.Changed >= 0 {
				changed = Count(r.Changed, "path", "paths") + " changed"
			}
			lines = append(lines, "  "+fit(r.World, 16)+" "+ss.Render(fit(status, 12))+st.Muted.Render(fit(" "+r.Duration, 10)+" "+changed))
		}
	}
	if c.Err != "" {
		lines = append(lines, st.Error.Render(c.Err))
	}
	lines = append(lines, "")
	if len(c.paths) == 0 {
		lines = append(lines, "None of these Worlds changed anything.")
		return block(lines, width, height)
	}
	// The table: the path, then one column per World.
	cw := 15 // "✓ B 1023.9 KiB" and a space
	pathW := max(width-2-len(c.Worlds)*cw, 16)
	if pathW+2+len(c.Worlds)*cw > width {
		cw = max((width-2-pathW)/max(len(c.Worlds), 1), 6)
	}
	var hb strings.Builder
	hb.WriteString(st.Muted.Render(fit("  path", pathW+2)))
	for i, w := range c.Worlds {
		s := st.Muted
		if i == c.col {
			s = st.Accent.Underline(true)
		}
		hb.WriteString(s.Render(fit(w, cw-1)) + " ")
	}
	lines = append(lines, hb.String())
	body := height - len(lines) - 1
	off := c.list.window(max(body, 1), len(c.paths))
	for i := off; i < min(off+max(body, 1), len(c.paths)); i++ {
		p := c.paths[i]
		mark, ms := "≠", st.Warning
		if p.Agree {
			mark, ms = "=", st.Muted
		}
		var b strings.Builder
		lead := ms.Render(mark)
		if i == c.list.Cursor {
			lead = st.Accent.Render("▸")
		}
		b.WriteString(lead + " " + fit(p.Path, pathW))
		for j, w := range c.Worlds {
			txt := c.cell(p, w)
			s := st.Text
			if txt == "—" {
				s = st.Muted
			}
			if c.chosen[p.Path] == w {
				txt, s = "✓ "+txt, st.Picked.Bold(true)
			}
			cell := fit(txt, cw-1)
			if i == c.list.Cursor && j == c.col {
				cell = st.Selected.Render(cell)
			} else {
				cell = s.Render(cell)
			}
			b.WriteString(cell + " ")
		}
		lines = append(lines, b.String())
	}
	lines = append(lines, "")
	for len(lines) < height-1 {
		lines = append(lines, "")
	}
	lines = lines[:height-1]
	lines = append(lines, st.Muted.Render("A, B… distinct versions · — the source's version · ≠ the Worlds disagree"))
	return block(lines, width, height)
}
