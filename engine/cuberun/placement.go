package cuberun

import (
	"strings"
)

// cubePlacement reads a cube World's placement from what it recorded.
func (e *Runtime) cubePlacement(w *World) Placement {
	p := Placement{Remote: true, From: plannedTemplateID(w)}
	if sb := e.cubeSandbox(w); sb != nil {
		p.Sandbox = sb.SandboxID
	}
	switch {
	case p.Sandbox == "":
		p.Carries = "planned: files only until strata up makes its sandbox"
	case strings.HasPrefix(p.From, "snap-"):
		p.Carries = CarriesMemory
	default:
		p.Carries = CarriesFiles
	}
	return p
}
