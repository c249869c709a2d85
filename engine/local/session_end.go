package local

import (
	"os"

	"github.com/stratahq/strata/engine/session"
)

// syncSessionEnd makes an ended session's transcript and meta.json durable:
// the init calls it once the caller waiting for the end has been told (end.fifo
// closed), so a short command's exit status does not wait for two fsyncs. The
// init outlives it: the session's namespaces end with the init, after it.
func syncSessionEnd(root *os.Root, transcript *os.File) {
	_ = transcript.Sync()
	f, err := root.Open(session.MetaFile)
	if err != nil {
		return
	}
	_ = f.Sync()
	_ = f.Close()
}
