package tui

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2ETmuxAgents drives the built strata at 80x24 in tmux with two
// fakeclaude agents started from the New World form: "busy" works (its
// tool needs no permission), "asks" needs permission for a command. From
// busy, the next-needs-you key jumps to asks; the person attaches to its
// terminal, answers y, detaches, and sees it working again.
func TestE2ETmuxAgents(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (make deps installs it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("agent Worlds mount overlays: run as root")
	}
	dir := t.TempDir()
	// The fake goes outside /tmp (a sandboxed World has its own) on a path
	// the World sees read-only, as a user's installed agent is seen.
	fakeDir := filepath.Join("/var/cache/strata-test/fakes", fmt.Sprintf("tui-%d", os.Getpid()))
	if err := os.MkdirAll(fakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(fakeDir) })
	bin, fake := filepath.Join(dir, "strata"), filepath.Join(fakeDir, "fakeclaude")
	for out, pkg := range map[string]string{bin: "../cmd/strata", fake: "../testdata/agents/fakeclaude"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, b)
		}
	}
	home, cfgDir, src := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "config.toml")
	// The record is written from inside the Worlds into a declared shared cache.
	recDir := filepath.Join(cfgDir, "records")
	if err := os.MkdirAll(recDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("[boundary]\nshared_caches = [\""+recDir+"\"]\n\n[agents.claude]\ncommand = [\""+fake+"\"]\nenv = [\"FAKECLAUDE_RECORD\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(recDir, "record.jsonl")
	env := []string{
		"STRATA_HOME=" + home, "STRATA_CONFIG=" + cfg, "XDG_CONFIG_HOME=" + cfgDir, "XDG_STATE_HOME=" + cfgDir,
		"TERM=xterm-256color", "FAKECLAUDE_RECORD=" + rec, "ANTHROPIC_API_KEY=sk-ant-test-0123456789abcdefghij",
	}
	x := tmux{t: t, name: fmt.Sprintf("strata-agents-%d", os.Getpid())}
	cmd := fmt.Sprintf("cd %s && exec env %s %s", src, strings.Join(env, " "), bin)
	x.run("new-session", "-d", "-s", x.name, "-x", "80", "-y", "24", cmd)
	t.Cleanup(func() {
		_ = exec.Command("tmux", "-L", x.name, "kill-server").Run()
		for _, w := range []string{"busy", "asks"} {
			rm := exec.Command(bin, "rm", w, "--force", "--purge", "--kill")
			rm.Env = append(os.Environ(), env...)
			_ = rm.Run()
		}
	})
	slow := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		for {
			s := x.screen()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; screen:\n%s", what, s)
			}
			time.Sleep(150 * time.Millisecond)
		}
	}
	// row is the Worlds pane's line of world w.
	row := func(s, w string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, " "+w+" ") || strings.Contains(l, " "+w+"…") {
				return l
			}
		}
		return ""
	}
	newAgent := func(name, prompt, extra string) {
		t.Helper()
		x.keys("1", "n")
		x.waitFor("New World")
		x.text(name)
		x.keys("Tab", "Tab", "Tab")
		x.text("claude")
		x.keys("Tab")
		x.text(prompt)
		x.keys("Tab")
		if extra != "" {
			x.run("send-keys", "-t", x.name, "-l", "--", extra)
		}
		x.keys("Enter")
		x.waitFor("created World " + name + ", started claude")
	}

	x.waitFor("No Worlds over")
	newAgent("busy", "[bash: sleep 300]", "--permission-mode bypassPermissions")
	newAgent("asks", "[bash: echo hi > hi.txt] [think: 20s]", "")
	slow("busy working and asks needing permission", func(s string) bool {
		return strings.Contains(row(s, "busy"), "working") && strings.Contains(row(s, "asks"), "permit?")
	})

	// From busy, the next-needs-you key goes to asks. (At 80x24 the panes
	// are tabs; the tab line ends with the selected World.)
	selected := func(s string) string {
		first, _, _ := strings.Cut(s, "\n")
		_, w, _ := strings.Cut(first, "· ")
		return strings.TrimSpace(w)
	}
	x.keys("1")
	for range 3 {
		if selected(x.screen()) == "busy" {
			break
		}
		x.keys("j")
	}
	slow("busy selected", func(s string) bool { return selected(s) == "busy" })
	x.text("!")
	slow("asks selected by the next-needs-you key", func(s string) bool { return selected(s) == "asks" })

	// Attach to its terminal, answer, detach.
	x.keys("2", "Enter")
	x.waitFor("Do you want to proceed?")
	x.text("y")
	x.keys("Enter")
	x.keys("C-]")
	x.waitFor("Transcript · asks") // back in the TUI
	x.keys("1")
	s := slow("asks working again", func(s string) bool { return strings.Contains(row(s, "asks"), "working") })
	if !strings.Contains(row(s, "busy"), "working") {
		t.Errorf("busy is no longer working:\n%s", s)
	}
	if b, err := os.ReadFile(filepath.Join(home, "worlds", "asks", "upper", "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("the permitted command did not run in asks: %q, %v", b, err)
	}
	t.Logf("final screen:\n%s", s)
	x.keys("q")
}
