package panes

import (
	"fmt"
	"testing"

	"github.com/stratahq/strata/engine"
)

func TestZZDebug(t *testing.T) {
	recs, _, err := engine.ReadTranscript("/tmp/tv/home/worlds/w-a/sessions/mx2hb72l-ikzx/transcript", 0)
	if err != nil {
		t.Fatal(err)
	}
	var cs []TranscriptChunk
	for _, r := range recs {
		c := TranscriptChunk{Time: r.Time}
		if ws, ok := r.WinSize(); ok {
			c.Cols, c.Rows = int(ws.Cols), int(ws.Rows)
		} else {
			c.Data = r.Data
		}
		cs = append(cs, c)
	}
	p := ptyTranscript(t, cs...)
	fmt.Println(p.Lines(), p.term.scrollback(), p.term.shownRows(), p.term.emu.CursorPosition(), p.term.emu.IsAltScreen())
	for i := 0; i < p.Lines(); i++ {
		fmt.Printf("%d %q\n", i, p.Line(i))
	}
}
