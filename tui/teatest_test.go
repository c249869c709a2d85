package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	tea "github.com/stratahq/strata/third_party/bubbletea"
	"github.com/stratahq/strata/third_party/teatest"
)

// TestTeaPickOneHunkOfThree runs the real program (teatest) on a real
// engine: a World's edit makes three hunks; the person opens the diff,
// picks the second hunk only and applies; the source then holds exactly
// that hunk. Engine events reach the program through Forward.
func TestTeaPickOneHunkOfThree(t *testing.T) {
	base := threeHunks()
	eng, src := testEngine(t, map[string]string{"a.txt": base})
	newWorld(t, eng, src, "w1", editThree)

	m, err := New(context.Background(), eng, Options{Source: src, Exe: "/bin/false", NoColor: true})
	if err != nil {
		t.Fatal(err)
	}
	tm := teatest.NewTestModel(t, *m, teatest.WithInitialTermSize(120, 40))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Forward(ctx, eng, tm.GetProgram()); err != nil {
		t.Fatal(err)
	}
	waitScreen := newTeaScreen(t, tm, 120, 40).wait
	waitScreen("a.txt")
	tm.Send(tea.KeyPressMsg{Code: '4', Text: "4"})
	waitScreen("line fifteen")
	tm.Send(tea.KeyPressMsg{Code: 'l', Text: "l"})
	tm.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	waitScreen("picked 1/3 hunks")
	tm.Send(tea.KeyPressMsg{Code: 'a', Text: "a"})
	waitScreen("Apply to the source?")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitScreen("applied 1 path")
	tm.Send(tea.KeyPressMsg{Code: 'q', Text: "q"})
	final := tm.FinalModel(t, teatest.WithFinalTimeout(teaScreenWait)).(Model)

	got, err := os.ReadFile(filepath.Join(src, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(base, "line 15\n", "line fifteen\n", 1); string(got) != want {
		t.Fatalf("source holds:\n%s", got)
	}
	// The settled view: the World still holds the two hunks not applied.
	scr := ansi.Strip(final.Render())
	if !strings.Contains(scr, "applied 1 path from w1") {
		t.Errorf("final screen:\n%s", scr)
	}
	if fd := final.diff.FileDiff(); fd == nil || len(fd.Hunks) != 2 {
		t.Errorf("after apply the diff should have the 2 other hunks")
	}
}
