package tui

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"

	"github.com/stratahq/strata/engine"
	"github.com/stratahq/strata/engine/session"
)

func TestMain(m *testing.M) {
	// Sessions re-execute the test binary as their init, as strata does.
	if len(os.Args) > 1 && os.Args[1] == engine.SessionInitArg {
		os.Exit(engine.SessionInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.ResidentInitArg {
		os.Exit(engine.ResidentInitMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.AgentSuperviseArg {
		os.Exit(engine.AgentSuperviseMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == engine.EgressArg {
		os.Exit(engine.EgressMain(os.Args[2:]))
	}
	// Resource samples run inline in the synchronous driver: keep them short.
	resourceInterval = 50 * time.Millisecond
	session.CatchIgnoredJobSignals() // run backgrounded, the tests still get resident inits
	os.Exit(m.Run())
}

// testEngine opens a real engine on a fresh state root, with a source tree
// holding files (name -> content).
func testEngine(t *testing.T, files map[string]string) (*engine.Engine, string) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	src := t.TempDir()
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	eng, err := engine.Open(ctx, engine.Options{StateRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return eng, src
}

// newWorld creates a World and, when script is set, runs it in the World
// and waits for it to end.
func newWorld(t *testing.T, eng *engine.Engine, src, name, script string) {
	t.Helper()
	ctx := context.Background()
	if _, err := eng.Create(ctx, engine.CreateOptions{Name: name, Source: src}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = eng.Remove(context.Background(), name, engine.RemoveOptions{Force: true, Purge: true, Kill: true})
	})
	if script == "" {
		return
	}
	runIn(t, eng, name, script)
}

func runIn(t *testing.T, eng *engine.Engine, name, script string) engine.SessionMeta {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	meta, err := eng.Exec(ctx, name, engine.ExecOptions{Argv: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	end, err := engine.WaitSession(ctx, eng.SessionDir(name, meta.ID))
	if err != nil {
		t.Fatal(err)
	}
	if end.ExitCode != 0 {
		t.Fatalf("script in %s exited %d", name, end.ExitCode)
	}
	return end
}

// driver runs a Model the way the program would, synchronously: every
// command's message is fed back into Update until none is left.
type driver struct {
	t   *testing.T
	m   Model
	raw []string // what was written raw to the terminal (bell, OSC)
}

func newDriver(t *testing.T, eng *engine.Engine, o Options, w, h int) *driver {
	t.Helper()
	m, err := New(context.Background(), eng, o)
	if err != nil {
		t.Fatal(err)
	}
	m.infoTTL = 0 // the synchronous driver would sleep through every expiry
	d := &driver{t: t, m: *m}
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	d.run(d.m.Init())
	return d
}

func (d *driver) send(msg tea.Msg) {
	d.t.Helper()
	nm, cmd := d.m.Update(msg)
	d.m = nm.(Model)
	d.run(cmd)
}

func (d *driver) run(cmd tea.Cmd) {
	d.t.Helper()
	if cmd == nil {
		return
	}
	msg := cmd()
	switch msg := msg.(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			d.run(c)
		}
	case tea.RawMsg:
		d.raw = append(d.raw, msg.Msg.(string))
	case tea.QuitMsg:
	default:
		// Messages addressed to the program itself (terminal queries,
		// exec) are not the model's; everything else goes back in.
		if strings.HasPrefix(reflect.TypeOf(msg).PkgPath(), "charm.land/bubbletea") {
			return
		}
		d.send(msg)
	}
}

func (d *driver) keys(keys ...string) {
	d.t.Helper()
	for _, k := range keys {
		d.send(press(k))
	}
}

func (d *driver) typeText(s string) {
	for _, r := range s {
		d.send(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
}

// selectWorld and selectChange press j in the focused pane until the
// Worlds or Changes pane selects want, and fail the test if the cursor
// stops first (want is not listed).
func (d *driver) selectWorld(want string) {
	d.t.Helper()
	d.down(want, func(m Model) string { return m.worlds.Selected() })
}

func (d *driver) selectChange(want string) {
	d.t.Helper()
	d.down(want, func(m Model) string { return m.changes.Selected() })
}

func (d *driver) down(want string, selected func(Model) string) {
	d.t.Helper()
	for selected(d.m) != want {
		before := selected(d.m)
		d.keys("j")
		if selected(d.m) == before {
			d.t.Fatalf("%s not listed:\n%s", want, d.screen())
		}
	}
}

// screen is the rendered screen without escape sequences.
func (d *driver) screen() string { return ansi.Strip(d.m.Render()) }

// eventually re-runs reload until cond holds, for work the engine does
// in the background (sessions).
func (d *driver) eventually(what string, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			d.t.Fatalf("timed out waiting for %s; screen:\n%s", what, d.screen())
		}
		time.Sleep(50 * time.Millisecond)
		d.keys("ctrl+r")
	}
}

func press(s string) tea.KeyPressMsg {
	switch s {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "tab":
		return tea.KeyPressMsg{Code: tea.KeyTab}
	case "shift+tab":
		return tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	case "ctrl+r":
		return tea.KeyPressMsg{Code: 'r', Mod: tea.ModCtrl}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	}
	r := []rune(s)
	return tea.KeyPressMsg{Code: r[0], Text: s}
}

func ansiWidth(s string) int { return ansi.StringWidth(s) }
