package themes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
)

func TestAutoFollowsBackground(t *testing.T) {
	d, err := Resolve(Options{Theme: "auto", Dark: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Resolve(Options{Theme: "auto", Dark: false})
	if err != nil {
		t.Fatal(err)
	}
	if d[Accent] != lipgloss.Color(dark[Accent]) || l[Accent] != lipgloss.Color(light[Accent]) {
		t.Errorf("auto: dark accent %v, light accent %v", d[Accent], l[Accent])
	}
	for _, r := range Roles() {
		for name, b := range map[string]builtin{"dark": dark, "light": light, "high-contrast": highContrast} {
			if !validColor(b[r]) {
				t.Errorf("%s: role %s = %q", name, r, b[r])
			}
		}
	}
}

func TestOverridesAndErrors(t *testing.T) {
	p, err := Resolve(Options{Theme: "dark", Colors: map[string]string{"accent": "#ff0000"}})
	if err != nil {
		t.Fatal(err)
	}
	if p[Accent] != lipgloss.Color("#ff0000") {
		t.Errorf("accent = %v", p[Accent])
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Colors: map[string]string{"acent": "#fff"}}, `unknown colour role "acent"`},
		{Options{Colors: map[string]string{"accent": "red"}}, "is not a colour"},
		{Options{Theme: "/nonexistent/x.toml"}, "not dark, light"},
	} {
		if _, err := Resolve(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
}

func TestThemeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.toml")
	os.WriteFile(path, []byte("base = \"light\"\n[colors]\nadded = \"#00ff00\"\n"), 0o644)
	p, err := Resolve(Options{Theme: path, Colors: map[string]string{"removed": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p[Added] != lipgloss.Color("#00ff00") || p[Removed] != lipgloss.Color("1") || p[Accent] != lipgloss.Color(light[Accent]) {
		t.Errorf("palette: added %v removed %v accent %v", p[Added], p[Removed], p[Accent])
	}
	os.WriteFile(path, []byte("base = \"light\"\nbogus = 1\n"), 0o644)
	if _, err := Resolve(Options{Theme: path}); err == nil || !strings.Contains(err.Error(), "unknown key bogus") {
		t.Errorf("unknown key: %v", err)
	}
}

func TestNoColorKeepsAttributes(t *testing.T) {
	s, err := New(Options{Theme: "dark", NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	out := s.Selected.Render("x") + s.Added.Render("y") + s.Match.Render("z") + s.StatusStyle("failed").Render("w")
	if strings.Contains(out, "38;") || strings.Contains(out, "48;") {
		t.Errorf("NO_COLOR output has colours: %q", out)
	}
	if !strings.Contains(s.Selected.Render("x"), "\x1b[") {
		t.Errorf("selection lost its reverse/bold: %q", s.Selected.Render("x"))
	}
	c, _ := New(Options{Theme: "dark"})
	if !strings.Contains(c.Added.Render("y"), "38;2;") {
		t.Errorf("coloured added has no colour: %q", c.Added.Render("y"))
	}
}
