package keymap

import (
	"fmt"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
)

// Area is a focus area: the bindings of an area apply while it has focus.
// Global bindings apply everywhere except inside a dialog, which is modal.
type Area string

const (
	Global     Area = "global"
	Worlds     Area = "worlds"
	Transcript Area = "transcript"
	Changes    Area = "changes"
	Diff       Area = "diff"
	Timeline   Area = "timeline"
	// Conflicts is the conflict view an apply opens when it conflicts; it
	// is modal like a dialog.
	Conflicts Area = "conflicts"
	// Compare lines Worlds up side by side to adopt one's version per
	// path; modal too.
	Compare Area = "compare"
	Dialog  Area = "dialog"
)

// Areas lists every area in the order help shows them.
func Areas() []Area {
	return []Area{Global, Worlds, Transcript, Changes, Diff, Timeline, Conflicts, Compare, Dialog}
}

// Modal reports whether an area takes every key while it is open: global
// bindings do not apply there, so it may reuse their keys.
func Modal(a Area) bool { return a == Dialog || a == Conflicts || a == Compare }

// Action names: "<area>.<verb>", the names config.toml [keys] uses.
const (
	Quit          = "global.quit"
	Help          = "global.help"
	Palette       = "global.palette"
	FocusNext     = "global.focus-next"
	FocusPrev     = "global.focus-prev"
	TabWorlds     = "global.tab-worlds"
	TabTranscript = "global.tab-transcript"
	TabChanges    = "global.tab-changes"
	TabDiff       = "global.tab-diff"
	TabTimeline   = "global.tab-timeline"
	AllWorlds     = "global.all-worlds"
	Refresh       = "global.refresh"
	Messages      = "global.messages"
	// NextNeedsYou jumps to the next World whose agent waits on the person.
	NextNeedsYou = "global.next-needs-you"
	// AllowEgress allows the host the World's egress proxy denied last.
	AllowEgress = "global.allow-egress"

	WorldsUp      = "worlds.up"
	WorldsDown    = "worlds.down"
	WorldsTop     = "worlds.top"
	WorldsBottom  = "worlds.bottom"
	WorldsNew     = "worlds.new"
	WorldsRemove  = "worlds.remove"
	WorldsRun     = "worlds.run"
	WorldsOpen    = "worlds.open"
	WorldsCompare = "worlds.compare"

	TranscriptUp          = "transcript.up"
	TranscriptDown        = "transcript.down"
	TranscriptPageUp      = "transcript.page-up"
	TranscriptPageDown    = "transcript.page-down"
	TranscriptTop         = "transcript.top"
	TranscriptFollow      = "transcript.follow"
	TranscriptSearch      = "transcript.search"
	TranscriptNextMatch   = "transcript.next-match"
	TranscriptPrevMatch   = "transcript.prev-match"
	TranscriptNextSession = "transcript.next-session"
	TranscriptPrevSession = "transcript.prev-session"
	TranscriptAttach      = "transcript.attach"
	TranscriptRun         = "transcript.run"
	TranscriptKill        = "transcript.kill"

	ChangesUp          = "changes.up"
	ChangesDown        = "changes.down"
	ChangesPageUp      = "changes.page-up"
	ChangesPageDown    = "changes.page-down"
	ChangesTop         = "changes.top"
	ChangesBottom      = "changes.bottom"
	ChangesOpen        = "changes.open"
	ChangesPick        = "changes.pick"
	ChangesPickAll     = "changes.pick-all"
	ChangesFold        = "changes.fold"
	ChangesTree        = "changes.tree"
	ChangesFilter      = "changes.filter"
	ChangesKind        = "changes.kind"
	ChangesClearFilter = "changes.clear-filter"
	ChangesApply       = "changes.apply"
	ChangesWriter      = "changes.writer"

	DiffUp          = "diff.up"
	DiffDown        = "diff.down"
	DiffPrevHunk    = "diff.prev-hunk"
	DiffNextHunk    = "diff.next-hunk"
	DiffPageUp      = "diff.page-up"
	DiffPageDown    = "diff.page-down"
	DiffPick        = "diff.pick"
	DiffRange       = "diff.range"
	DiffSideBySide  = "diff.side-by-side"
	DiffWrap        = "diff.wrap"
	DiffLessContext = "diff.less-context"
	DiffMoreContext = "diff.more-context"
	DiffEdit        = "diff.edit"
	DiffApply       = "diff.apply"
	DiffNextFile    = "diff.next-file"
	DiffPrevFile    = "diff.prev-file"
	DiffBack        = "diff.back"
	DiffVsSource    = "diff.vs-source"
	DiffComment     = "diff.comment"
	DiffUncomment   = "diff.uncomment"
	DiffSendReview  = "diff.send-review"

	TimelineUp       = "timeline.up"
	TimelineDown     = "timeline.down"
	TimelineSnapshot = "timeline.snapshot"
	TimelineRollback = "timeline.rollback"
	TimelineFork     = "timeline.fork"
	TimelineShow     = "timeline.show"

	ConflictsUp       = "conflicts.up"
	ConflictsDown     = "conflicts.down"
	ConflictsNextFile = "conflicts.next-file"
	ConflictsPrevFile = "conflicts.prev-file"
	ConflictsOurs     = "conflicts.ours"
	ConflictsTheirs   = "conflicts.theirs"
	ConflictsBoth     = "conflicts.both"
	ConflictsEdit     = "conflicts.edit"
	ConflictsApply    = "conflicts.apply"
	ConflictsCancel   = "conflicts.cancel"

	CompareUp     = "compare.up"
	CompareDown   = "compare.down"
	CompareLeft   = "compare.left"
	CompareRight  = "compare.right"
	CompareAdopt  = "compare.adopt"
	CompareApply  = "compare.apply"
	CompareRemove = "compare.remove-others"
	CompareCancel = "compare.cancel"

	DialogConfirm     = "dialog.confirm"
	DialogCancel      = "dialog.cancel"
	DialogNextField   = "dialog.next-field"
	DialogPrevField   = "dialog.prev-field"
	DialogHistoryPrev = "dialog.history-prev"
	DialogHistoryNext = "dialog.history-next"
	DialogYes         = "dialog.yes"
	DialogNo          = "dialog.no"
)

// Action is one named binding.
type Action struct {
	Name    string
	Area    Area
	Binding key.Binding
	// Short marks the actions the status bar shows for the area.
	Short bool
}

// Desc is the action's help text.
func (a *Action) Desc() string { return a.Binding.Help().Desc }

// KeyMap is every binding, by area.
type KeyMap struct {
	actions []*Action
	byName  map[string]*Action
}

type def struct {
	name  string
	keys  []string
	desc  string
	short bool
}

func defaults() []def {
	k := func(keys ...string) []string { return keys }
	return []def{
		{Quit, k("q", "ctrl+c"), "quit", true},
		{Help, k("?"), "help", true},
		{Palette, k(":"), "command palette", true},
		{FocusNext, k("tab"), "next pane", false},
		{FocusPrev, k("shift+tab"), "previous pane", false},
		{TabWorlds, k("1"), "Worlds pane", false},
		{TabTranscript, k("2"), "Transcript pane", false},
		{TabChanges, k("3"), "Changes pane", false},
		{TabDiff, k("4"), "Diff pane", false},
		{TabTimeline, k("5"), "Timeline pane", false},
		{AllWorlds, k("A"), "all Worlds / this source", false},
		{Refresh, k("ctrl+r"), "reload everything", false},
		{Messages, k("L"), "message log (full texts)", false},
		{NextNeedsYou, k("!"), "next World that needs you", true},
		{AllowEgress, k("E"), "allow the last denied egress host", false},

		{WorldsUp, k("up", "k"), "previous World", false},
		{WorldsDown, k("down", "j"), "next World", false},
		{WorldsTop, k("g", "home"), "first World", false},
		{WorldsBottom, k("G", "end"), "last World", false},
		{WorldsNew, k("n"), "new World", true},
		{WorldsRemove, k("D"), "remove World", true},
		{WorldsRun, k("x"), "run a command", true},
		{WorldsOpen, k("enter"), "open its changes", true},
		{WorldsCompare, k("c"), "compare Worlds (last fan-out)", true},

		{TranscriptUp, k("up", "k"), "scroll up", false},
		{TranscriptDown, k("down", "j"), "scroll down", false},
		{TranscriptPageUp, k("pgup", "ctrl+b"), "page up", false},
		{TranscriptPageDown, k("pgdown", "ctrl+f"), "page down", false},
		{TranscriptTop, k("g", "home"), "oldest output", false},
		{TranscriptFollow, k("G", "end"), "follow the tail", true},
		{TranscriptSearch, k("/"), "search", true},
		{TranscriptNextMatch, k("n"), "next match", false},
		{TranscriptPrevMatch, k("N"), "previous match", false},
		{TranscriptNextSession, k("]"), "next session", true},
		{TranscriptPrevSession, k("["), "previous session", false},
		{TranscriptAttach, k("enter"), "attach full screen", true},
		{TranscriptRun, k("x"), "run a command", true},
		{TranscriptKill, k("K"), "kill the session", false},

		{ChangesUp, k("up", "k"), "previous path", false},
		{ChangesDown, k("down", "j"), "next path", false},
		{ChangesPageUp, k("pgup", "ctrl+b"), "page up", false},
		{ChangesPageDown, k("pgdown", "ctrl+f"), "page down", false},
		{ChangesTop, k("g", "home"), "first path", false},
		{ChangesBottom, k("G", "end"), "last path", false},
		{ChangesOpen, k("enter"), "open the diff", true},
		{ChangesPick, k("space"), "pick / unpick path", true},
		{ChangesPickAll, k("ctrl+a"), "pick / unpick every path shown", false},
		{ChangesFold, k("z"), "collapse / expand the directory", false},
		{ChangesTree, k("t"), "tree / flat list", true},
		{ChangesFilter, k("/"), "filter by text", true},
		{ChangesKind, k("f"), "filter by kind", false},
		{ChangesClearFilter, k("esc"), "clear filters", false},
		{ChangesApply, k("a"), "apply picked", true},
		{ChangesWriter, k("w"), "who wrote it: its session's output", true},

		{DiffUp, k("up", "k"), "previous line", false},
		{DiffDown, k("down", "j"), "next line", false},
		{DiffPrevHunk, k("left", "h"), "previous hunk", false},
		{DiffNextHunk, k("right", "l"), "next hunk", true},
		{DiffPageUp, k("pgup", "ctrl+b"), "page up", false},
		{DiffPageDown, k("pgdown", "ctrl+f"), "page down", false},
		{DiffPick, k("space"), "pick / unpick hunk or range", true},
		{DiffRange, k("v"), "select a line range", true},
		{DiffSideBySide, k("s"), "unified / side by side", true},
		{DiffWrap, k("w"), "wrap long lines", false},
		{DiffLessContext, k("{"), "less context", false},
		{DiffMoreContext, k("}"), "more context", false},
		{DiffEdit, k("e"), "edit in $EDITOR", false},
		{DiffApply, k("a"), "apply picked", true},
		{DiffNextFile, k("]"), "next file", false},
		{DiffPrevFile, k("["), "previous file", false},
		{DiffBack, k("esc"), "back to changes", false},
		{DiffVsSource, k("o"), "World vs the source now / vs its base", false},
		{DiffComment, k("c"), "comment on the line, range or hunk (review)", true},
		{DiffUncomment, k("X"), "remove the review comment under the cursor", false},
		{DiffSendReview, k("C"), "send the review comments to the World's agent", true},

		{TimelineUp, k("up", "k"), "older snapshot", false},
		{TimelineDown, k("down", "j"), "newer snapshot", false},
		{TimelineSnapshot, k("s"), "take a snapshot", true},
		{TimelineRollback, k("r"), "roll back to it", true},
		{TimelineFork, k("f"), "fork from it", true},
		{TimelineShow, k("enter"), "what changed", true},

		{ConflictsUp, k("up", "k"), "previous conflict", false},
		{ConflictsDown, k("down", "j"), "next conflict", false},
		{ConflictsNextFile, k("]", "tab"), "next conflicting path", false},
		{ConflictsPrevFile, k("[", "shift+tab"), "previous conflicting path", false},
		{ConflictsOurs, k("o"), "keep ours (the World)", true},
		{ConflictsTheirs, k("t"), "keep theirs (the source)", true},
		{ConflictsBoth, k("b"), "keep both, ours first", true},
		{ConflictsEdit, k("e"), "resolve in $EDITOR", true},
		{ConflictsApply, k("enter"), "apply again", true},
		{ConflictsCancel, k("esc"), "close, nothing written", true},

		{CompareUp, k("up", "k"), "previous path", false},
		{CompareDown, k("down", "j"), "next path", false},
		{CompareLeft, k("left", "h"), "previous World", false},
		{CompareRight, k("right", "l"), "next World", false},
		{CompareAdopt, k("space"), "adopt this World's version", true},
		{CompareApply, k("enter"), "apply the adopted versions", true},
		{CompareRemove, k("D"), "remove the Worlds not chosen", true},
		{CompareCancel, k("esc"), "close", true},

		{DialogConfirm, k("enter"), "confirm", true},
		{DialogCancel, k("esc"), "cancel", true},
		{DialogNextField, k("tab"), "next field", true},
		{DialogPrevField, k("shift+tab"), "previous field", false},
		{DialogHistoryPrev, k("up"), "older entry", false},
		{DialogHistoryNext, k("down"), "newer entry", false},
		{DialogYes, k("y"), "yes (questions without fields)", false},
		{DialogNo, k("n"), "no (questions without fields)", false},
	}
}

// Default is the built-in key map.
func Default() *KeyMap {
	km := &KeyMap{byName: map[string]*Action{}}
	for _, d := range defaults() {
		area, _, _ := strings.Cut(d.name, ".")
		a := &Action{
			Name:    d.name,
			Area:    Area(area),
			Binding: key.NewBinding(key.WithKeys(d.keys...), key.WithHelp(helpKey(d.keys), d.desc)),
			Short:   d.short,
		}
		km.actions = append(km.actions, a)
		km.byName[d.name] = a
	}
	return km
}

// Load is Default with config.toml [keys] overrides applied: each entry maps
// an action name to its new keys (an empty list unbinds it). Unknown actions,
// empty key names and two actions of one area sharing a key are errors, so a
// typo in the config never silently leaves a key dead.
func Load(overrides map[string][]string) (*KeyMap, error) {
	km := Default()
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a, ok := km.byName[n]
		if !ok {
			return nil, fmt.Errorf("keys: unknown action %q (%s)", n, km.suggest(n))
		}
		keys := overrides[n]
		for _, k := range keys {
			if strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("keys: action %q: empty key name", n)
			}
			if err := CheckKey(k); err != nil {
				return nil, fmt.Errorf("keys: action %q: %w", n, err)
			}
		}
		if len(keys) == 0 {
			a.Binding.Unbind()
			continue
		}
		a.Binding.SetKeys(keys...)
		a.Binding.SetHelp(helpKey(keys), a.Desc())
	}
	if err := km.Validate(); err != nil {
		return nil, err
	}
	return km, nil
}

// Validate reports the first key bound twice where both bindings could fire:
// within one area, or between the global area and a pane's area (dialogs and
// the conflict view are modal, so they may reuse global keys).
func (km *KeyMap) Validate() error {
	owner := map[Area]map[string]string{}
	for _, a := range km.actions {
		if owner[a.Area] == nil {
			owner[a.Area] = map[string]string{}
		}
		for _, k := range a.Binding.Keys() {
			if other, ok := owner[a.Area][k]; ok {
				return fmt.Errorf("keys: %q is bound to both %s and %s", k, other, a.Name)
			}
			owner[a.Area][k] = a.Name
		}
	}
	for _, a := range km.actions {
		if a.Area == Global || Modal(a.Area) {
			continue
		}
		for _, k := range a.Binding.Keys() {
			if other, ok := owner[Global][k]; ok {
				return fmt.Errorf("keys: %q is bound to both %s and %s (global keys work in every pane)", k, other, a.Name)
			}
		}
	}
	return nil
}

func (km *KeyMap) suggest(name string) string {
	area, _, _ := strings.Cut(name, ".")
	var same []string
	for _, a := range km.actions {
		if string(a.Area) == area {
			same = append(same, a.Name)
		}
	}
	if len(same) > 0 {
		return "actions of " + area + ": " + strings.Join(same, ", ")
	}
	var as []string
	for _, a := range Areas() {
		as = append(as, string(a))
	}
	return "action names are AREA.VERB with AREA one of " + strings.Join(as, ", ")
}

// Match returns the action of area whose binding matches the key press.
func (km *KeyMap) Match(area Area, msg fmt.Stringer) (string, bool) {
	for _, a := range km.actions {
		if a.Area == area && key.Matches(msg, a.Binding) {
			return a.Name, true
		}
	}
	return "", false
}

// Action returns the named action; nil when there is none.
func (km *KeyMap) Action(name string) *Action { return km.byName[name] }

// Binding returns the named action's binding (a disabled one if unknown).
func (km *KeyMap) Binding(name string) key.Binding {
	if a := km.byName[name]; a != nil {
		return a.Binding
	}
	return key.NewBinding(key.WithDisabled())
}

// Actions lists every action, in help order.
func (km *KeyMap) Actions() []*Action { return km.actions }

// Area lists the actions of one area.
func (km *KeyMap) Area(area Area) []*Action {
	var out []*Action
	for _, a := range km.actions {
		if a.Area == area {
			out = append(out, a)
		}
	}
	return out
}

// ShortHelp is what the status bar shows while area has focus: the area's
// short actions, then the global ones.
func (km *KeyMap) ShortHelp(area Area) []key.Binding {
	var out []key.Binding
	add := func(ar Area) {
		for _, a := range km.Area(ar) {
			if a.Short && a.Binding.Enabled() {
				out = append(out, a.Binding)
			}
		}
	}
	add(area)
	if !Modal(area) {
		add(Global)
	}
	return out
}

// FullHelp is the `?` overlay: one group per area, the focused one first.
func (km *KeyMap) FullHelp(focused Area) []HelpGroup {
	order := []Area{focused}
	for _, a := range Areas() {
		if a != focused {
			order = append(order, a)
		}
	}
	var out []HelpGroup
	for _, ar := range order {
		g := HelpGroup{Area: ar}
		for _, a := range km.Area(ar) {
			if a.Binding.Enabled() {
				g.Bindings = append(g.Bindings, a.Binding)
				g.Actions = append(g.Actions, a)
			}
		}
		if len(g.Bindings) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// HelpGroup is one area's bindings in the full help.
type HelpGroup struct {
	Area     Area
	Bindings []key.Binding
	// Actions are the bindings' actions, in the same order.
	Actions []*Action
}

var keyNames = map[string]string{
	"up": "↑", "down": "↓", "left": "←", "right": "→",
	"enter": "enter", "space": "space", "pgup": "pgup", "pgdown": "pgdn",
}

// KeysLabel is every key of the action the way the help overlay and the
// palette show them ("↑/k/ctrl+p"): keys added in config.toml show there
// even when the status bar has room for two only.
func (a *Action) KeysLabel() string {
	if !a.Binding.Enabled() {
		return ""
	}
	return keysLabel(a.Binding.Keys(), -1)
}

// helpKey renders up to two keys the way the status bar shows them: "↑/k".
func helpKey(keys []string) string { return keysLabel(keys, 2) }

func keysLabel(keys []string, most int) string {
	var parts []string
	for i, k := range keys {
		if i == most {
			break
		}
		if n, ok := keyNames[k]; ok {
			k = n
		}
		parts = append(parts, k)
	}
	return strings.Join(parts, "/")
}

// Markdown is the key reference README.md carries under "## Keys": one
// table row per action, in help order, from the default bindings.
func (km *KeyMap) Markdown() string {
	var b strings.Builder
	b.WriteString("| Where | Keys | Does | Action (config.toml `[keys]`) |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, a := range km.actions {
		keys := make([]string, 0, len(a.Binding.Keys()))
		for _, k := range a.Binding.Keys() {
			if k == "|" {
				k = `\|`
			}
			keys = append(keys, "`"+k+"`")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", a.Area, strings.Join(keys, " "), a.Desc(), a.Name)
	}
	return b.String()
}
