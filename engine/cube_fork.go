package engine

import (
	"context"
	"strings"
)

// Placement says where a World runs and what state its runtime gave it:
// for a cube World, its sandbox, the node (when the deployment says), what
// the sandbox was made from and whether it carries the parent's memory and
// root file system (made from a Cube snapshot) or only its files (a fresh
// sandbox from a template, the upper restored by strata).
type Placement struct {
	World   string `json:"world"`
	Sandbox string `json:"sandbox,omitempty"`
	Node    string `json:"node,omitempty"`
	From    string `json:"from,omitempty"`
	Carries string `json:"carries,omitempty"`
	// Remote reports whether the World runs in a sandbox of its own.
	Remote bool `json:"remote"`
}

// Carries values.
const (
	CarriesMemory = "memory and rootfs (from a Cube snapshot) and files"
	CarriesFiles  = "files only (a new sandbox from a template; memory and rootfs not kept)"
)

// Placements says where each World runs (fork -n N reports it per clone).
// The node is known when the deployment lists exactly one node; CubeAPI
// does not say which node runs a sandbox.
func (e *Engine) Placements(ctx context.Context, ws []*World) []Placement {
	out := make([]Placement, 0, len(ws))
	node, looked := "", false
	for _, w := range ws {
		p := e.runtimeFor(w).placement(w)
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
