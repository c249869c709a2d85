package themes

import (
	"errors"
	"fmt"
	"image/color"
	"os"
	"sort"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/BurntSushi/toml"
)

// Role names what a colour is for; themes and [colors] overrides map roles
// to colours.
type Role string

const (
	Text          Role = "text"
	Muted         Role = "muted"
	Accent        Role = "accent"
	Header        Role = "header"
	Border        Role = "border"
	BorderFocus   Role = "border-focus"
	Selection     Role = "selection"
	SelectionText Role = "selection-text"
	Added         Role = "added"
	Removed       Role = "removed"
	AddedWord     Role = "added-word"
	RemovedWord   Role = "removed-word"
	HunkHeader    Role = "hunk-header"
	Picked        Role = "picked"
	Warning       Role = "warning"
	Error         Role = "error"
	StatusBar     Role = "status-bar"
	Match         Role = "match"
	Running       Role = "running"
	Waiting       Role = "waiting"
	Failed        Role = "failed"
	Done          Role = "done"
	Idle          Role = "idle"
)

// Roles lists every role, in the order theme files document them.
func Roles() []Role {
	return []Role{
		Text, Muted, Accent, Header, Border, BorderFocus, Selection, SelectionText,
		Added, Removed, AddedWord, RemovedWord, HunkHeader, Picked, Warning, Error,
		StatusBar, Match, Running, Waiting, Failed, Done, Idle,
	}
}

// Palette maps every role to a colour.
type Palette map[Role]color.Color

// builtin palettes are written as strings lipgloss.Color understands
// (#rrggbb, or an ANSI number "0".."255").
type builtin map[Role]string

var dark = builtin{
	Text: "#d8dee9", Muted: "#7b8496", Accent: "#88c0d0", Header: "#e5e9f0",
	Border: "#4c566a", BorderFocus: "#88c0d0", Selection: "#3b4252", SelectionText: "#eceff4",
	Added: "#a3be8c", Removed: "#bf616a", AddedWord: "#2e5e3a", RemovedWord: "#6e2b33",
	HunkHeader: "#b48ead", Picked: "#ebcb8b", Warning: "#ebcb8b", Error: "#ff6b6b",
	StatusBar: "#2e3440", Match: "#ebcb8b",
	Running: "#88c0d0", Waiting: "#ebcb8b", Failed: "#ff6b6b", Done: "#a3be8c", Idle: "#7b8496",
}

var light = builtin{
	Text: "#24292f", Muted: "#6e7781", Accent: "#0969da", Header: "#1f2328",
	Border: "#afb8c1", BorderFocus: "#0969da", Selection: "#ddf4ff", SelectionText: "#1f2328",
	Added: "#116329", Removed: "#a40e26", AddedWord: "#aceebb", RemovedWord: "#ffc1c0",
	HunkHeader: "#8250df", Picked: "#9a6700", Warning: "#9a6700", Error: "#cf222e",
	StatusBar: "#eaeef2", Match: "#fff8c5",
	Running: "#0969da", Waiting: "#9a6700", Failed: "#cf222e", Done: "#116329", Idle: "#6e7781",
}

// highContrast sticks to the 16 ANSI colours the terminal's own palette
// defines, at their brightest, so it follows the person's terminal settings.
var highContrast = builtin{
	Text: "15", Muted: "7", Accent: "14", Header: "15",
	Border: "7", BorderFocus: "11", Selection: "11", SelectionText: "0",
	Added: "10", Removed: "9", AddedWord: "2", RemovedWord: "1",
	HunkHeader: "13", Picked: "11", Warning: "11", Error: "9",
	StatusBar: "0", Match: "11",
	Running: "14", Waiting: "11", Failed: "9", Done: "10", Idle: "7",
}

// Options choose a theme.
type Options struct {
	// Theme is "auto" (or ""), "dark", "light", "high-contrast", or the path
	// of a TOML theme file.
	Theme string
	// Colors overrides roles (config.toml [colors]).
	Colors map[string]string
	// Dark is the terminal's background as reported (tea.BackgroundColorMsg);
	// "auto" picks the dark or light palette from it.
	Dark bool
	// NoColor drops every colour and keeps bold, underline and reverse.
	NoColor bool
}

// NoColorFromEnv reports whether NO_COLOR asks for no colour (https://no-color.org).
func NoColorFromEnv() bool { return os.Getenv("NO_COLOR") != "" }

// ThemeFile is a TOML theme: a base palette and role overrides.
//
//	base = "dark"
//	[colors]
//	accent = "#ff79c6"
type ThemeFile struct {
	Base   string            `toml:"base"`
	Colors map[string]string `toml:"colors"`
}

// Resolve returns the palette Options describe. "auto" takes each role's
// light or dark colour with lipgloss.LightDark from the reported background.
func Resolve(o Options) (Palette, error) {
	p := Palette{}
	base := func(name string) bool {
		var b builtin
		switch name {
		case "", "auto":
			ld := lipgloss.LightDark(o.Dark)
			for _, r := range Roles() {
				p[r] = ld(lipgloss.Color(light[r]), lipgloss.Color(dark[r]))
			}
			return true
		case "dark":
			b = dark
		case "light":
			b = light
		case "high-contrast":
			b = highContrast
		default:
			return false
		}
		for _, r := range Roles() {
			p[r] = lipgloss.Color(b[r])
		}
		return true
	}
	if !base(o.Theme) {
		var tf ThemeFile
		md, err := toml.DecodeFile(o.Theme, &tf)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("theme %q: not dark, light, high-contrast, auto or a theme file", o.Theme)
			}
			return nil, fmt.Errorf("read theme %s: %w", o.Theme, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return nil, fmt.Errorf("read theme %s: unknown key %s", o.Theme, und[0])
		}
		if !base(tf.Base) {
			return nil, fmt.Errorf("theme %s: unknown base %q (dark, light, high-contrast, auto)", o.Theme, tf.Base)
		}
		if err := override(p, tf.Colors, "theme "+o.Theme); err != nil {
			return nil, err
		}
	}
	if err := override(p, o.Colors, "colors"); err != nil {
		return nil, err
	}
	return p, nil
}

func override(p Palette, colors map[string]string, where string) error {
	known := map[Role]bool{}
	for _, r := range Roles() {
		known[r] = true
	}
	keys := make([]string, 0, len(colors))
	for k := range colors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !known[Role(k)] {
			var names []string
			for _, r := range Roles() {
				names = append(names, string(r))
			}
			return fmt.Errorf("%s: unknown colour role %q (roles: %s)", where, k, strings.Join(names, ", "))
		}
		v := colors[k]
		if !validColor(v) {
			return fmt.Errorf("%s: %s = %q is not a colour (#rgb, #rrggbb or an ANSI number 0-255)", where, k, v)
		}
		p[Role(k)] = lipgloss.Color(v)
	}
	return nil
}

func validColor(s string) bool {
	if strings.HasPrefix(s, "#") {
		h := s[1:]
		if len(h) != 3 && len(h) != 6 {
			return false
		}
		for _, c := range h {
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
		return true
	}
	n := 0
	if s == "" || len(s) > 3 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n <= 255
}

// Styles are the semantic styles panes draw with.
type Styles struct {
	NoColor bool

	Text, Muted, Accent, Bold lipgloss.Style
	Title, TitleFocused       lipgloss.Style
	// Frame and FrameFocused colour a pane's border; focus changes the
	// border's shape (FrameBorder, FocusedBorder) as well as its colour, so it
	// shows without colour too.
	Frame, FrameFocused        lipgloss.Style
	FrameBorder, FocusedBorder lipgloss.Border
	// Selected is the cursor row of the focused pane; SelectedBlur of the others.
	Selected, SelectedBlur lipgloss.Style

	Added, Removed, AddedWord, RemovedWord, HunkHeader, HunkHeaderFocused, LineNumber lipgloss.Style
	Picked, Warning, Error                                                            lipgloss.Style

	StatusBar, StatusKey, StatusDesc, StatusError lipgloss.Style
	Tab, TabActive                                lipgloss.Style
	Dialog, DialogTitle, Input, InputCursor       lipgloss.Style
	Match, MatchCurrent                           lipgloss.Style

	// Status styles a World's status (running, waiting, failed, done, idle, planned, stopped).
	Status map[string]lipgloss.Style
	// Kind styles a change kind letter (A, M, D, T).
	Kind map[string]lipgloss.Style
}

// New builds Styles from Options.
func New(o Options) (*Styles, error) {
	p, err := Resolve(o)
	if err != nil {
		return nil, err
	}
	if o.NoColor {
		return noColorStyles(), nil
	}
	return FromPalette(p), nil
}

// FromPalette builds coloured Styles.
func FromPalette(p Palette) *Styles {
	c := func(r Role) color.Color { return p[r] }
	fg := func(r Role) lipgloss.Style { return lipgloss.NewStyle().Foreground(c(r)) }
	s := &Styles{
		Text:   fg(Text),
		Muted:  fg(Muted),
		Accent: fg(Accent),
		Bold:   lipgloss.NewStyle().Bold(true),

		Title:         fg(Muted).Bold(true),
		TitleFocused:  fg(Accent).Bold(true),
		Frame:         fg(Border),
		FrameFocused:  fg(BorderFocus).Bold(true),
		FrameBorder:   lipgloss.RoundedBorder(),
		FocusedBorder: lipgloss.ThickBorder(),
		Selected:      lipgloss.NewStyle().Background(c(Selection)).Foreground(c(SelectionText)).Bold(true),
		SelectedBlur:  lipgloss.NewStyle().Background(c(Selection)).Foreground(c(SelectionText)),

		Added:             fg(Added),
		Removed:           fg(Removed),
		AddedWord:         fg(Added).Background(c(AddedWord)).Bold(true),
		RemovedWord:       fg(Removed).Background(c(RemovedWord)).Bold(true),
		HunkHeader:        fg(HunkHeader),
		HunkHeaderFocused: fg(HunkHeader).Bold(true).Reverse(true),
		LineNumber:        fg(Muted),
		Picked:            fg(Picked).Bold(true),
		Warning:           fg(Warning),
		Error:             fg(Error).Bold(true),

		StatusBar:   lipgloss.NewStyle().Background(c(StatusBar)).Foreground(c(Text)),
		StatusKey:   lipgloss.NewStyle().Background(c(StatusBar)).Foreground(c(Accent)).Bold(true),
		StatusDesc:  lipgloss.NewStyle().Background(c(StatusBar)).Foreground(c(Muted)),
		StatusError: lipgloss.NewStyle().Background(c(StatusBar)).Foreground(c(Error)).Bold(true),
		Tab:         fg(Muted),
		TabActive:   fg(Accent).Bold(true).Underline(true),

		Dialog:      lipgloss.NewStyle().Border(lipgloss.DoubleBorder()).BorderForeground(c(BorderFocus)).Padding(0, 1),
		DialogTitle: fg(Header).Bold(true),
		Input:       fg(Text),
		InputCursor: lipgloss.NewStyle().Reverse(true),
		Match:       lipgloss.NewStyle().Background(c(Match)).Foreground(c(SelectionText)),
		MatchCurrent: lipgloss.NewStyle().Background(c(Match)).Foreground(c(SelectionText)).
			Bold(true).Underline(true),
	}
	s.Status = map[string]lipgloss.Style{
		"running": fg(Running),
		"waiting": fg(Waiting).Bold(true),
		"failed":  fg(Failed).Bold(true),
		"done":    fg(Done),
		"idle":    fg(Idle),
		"planned": fg(Muted).Italic(true),
		"stopped": fg(Muted),
		"broken":  fg(Failed).Bold(true),
	}
	s.Kind = map[string]lipgloss.Style{"A": fg(Added), "M": fg(Warning), "D": fg(Removed), "T": fg(HunkHeader)}
	return s
}

// noColorStyles keep the distinctions colour would make with bold,
// underline, reverse and border shapes only.
func noColorStyles() *Styles {
	n := lipgloss.NewStyle
	s := &Styles{
		NoColor: true,
		Text:    n(), Muted: n(), Accent: n().Bold(true), Bold: n().Bold(true),
		Title: n(), TitleFocused: n().Bold(true).Underline(true),
		Frame: n(), FrameFocused: n().Bold(true),
		FrameBorder: lipgloss.NormalBorder(), FocusedBorder: lipgloss.DoubleBorder(),
		Selected:     n().Reverse(true).Bold(true),
		SelectedBlur: n().Underline(true),
		Added:        n(), Removed: n(),
		AddedWord: n().Underline(true).Bold(true), RemovedWord: n().Underline(true),
		HunkHeader: n().Bold(true), HunkHeaderFocused: n().Bold(true).Reverse(true),
		LineNumber: n(), Picked: n().Bold(true), Warning: n().Bold(true), Error: n().Bold(true),
		StatusBar: n(), StatusKey: n().Bold(true), StatusDesc: n(), StatusError: n().Bold(true).Reverse(true),
		Tab: n(), TabActive: n().Bold(true).Reverse(true),
		Dialog: n().Border(lipgloss.DoubleBorder()).Padding(0, 1), DialogTitle: n().Bold(true),
		Input: n(), InputCursor: n().Reverse(true),
		Match: n().Reverse(true), MatchCurrent: n().Reverse(true).Bold(true).Underline(true),
	}
	s.Status = map[string]lipgloss.Style{
		"running": n(), "waiting": n().Bold(true), "failed": n().Bold(true).Reverse(true),
		"done": n(), "idle": n(), "planned": n().Italic(true), "stopped": n(),
		"broken": n().Bold(true).Reverse(true),
	}
	s.Kind = map[string]lipgloss.Style{"A": n().Bold(true), "M": n(), "D": n().Bold(true), "T": n()}
	return s
}

// StatusStyle returns the style of a World status (Text when unknown).
func (s *Styles) StatusStyle(status string) lipgloss.Style {
	if st, ok := s.Status[status]; ok {
		return st
	}
	return s.Text
}

// KindStyle returns the style of a change kind letter.
func (s *Styles) KindStyle(letter string) lipgloss.Style {
	if st, ok := s.Kind[letter]; ok {
		return st
	}
	return s.Text
}
