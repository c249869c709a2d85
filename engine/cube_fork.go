package engine

import (
	"context"
	"strings"
)

// Placements says where each World runs (fork -n N reports it per clone).
// The node is known when the deployment lists exactly one node; CubeAPI
// does not say which node runs a sandbox.
func (e *Engine) Placements(ctx context.Context, ws []*World) []Placement {
	out := make([]Placement, 0, len(ws))
	node, looked := "", false
	for _, w := range ws {
		p := e.runtimeFor(w).Placement(w)
		p.World = w.Name
		if p.Sandbox != "" && !looked {
			looked = true
			if c, err := e.CubeCluster(ctx); err == nil && len(c.Nodes) == 1 {
				node = c.Nodes[0].NodeID
			}
		}
		if p.Sandbox != "" {
			p.Node = node
		}
		out = append(out, p)
	}
	return out
}

// cubePlacement reads a cube World's placement from what it recorded.
func (e *Engine) cubePlacement(w *World) Placement {
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
