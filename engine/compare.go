package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/stratahq/strata/fsx"
	"github.com/stratahq/strata/overlay"
)

// ComparedVersion is one version of a path and the Worlds that hold it.
type ComparedVersion struct {
	Worlds []string `json:"worlds"`
	Type   string   `json:"type"` // file, dir, symlink, other; "absent" when deleted or never there
	Mode   string   `json:"mode,omitempty"`
	Size   int64    `json:"size,omitempty"`
	Hash   string   `json:"hash,omitempty"`   // sha256 of the content, or of a symlink's target
	Target string   `json:"target,omitempty"` // symlink target
	Source bool     `json:"source,omitempty"` // this is what the source holds now
}

// ComparedPath is one path changed in at least one of the compared Worlds.
type ComparedPath struct {
	Path      string            `json:"path"`
	PathBytes []byte            `json:"path_bytes,omitempty"` // only in JSON (overlay.JSONPath)
	ChangedBy []string          `json:"changed_by"`
	Agree     bool              `json:"agree"` // every World sees the same version
	Versions  []ComparedVersion `json:"versions"`
}

// Comparison lines up several Worlds' changes over one source. Paths no World
// changed are not listed: every World reads them from the source, so they
// agree by construction.
type Comparison struct {
	Worlds    []string       `json:"worlds"`
	Source    string         `json:"source"`
	Paths     []ComparedPath `json:"paths"`
	Agreed    int            `json:"agreed"`    // changed paths all Worlds hold identically
	Disagreed int            `json:"disagreed"` // changed paths with two or more versions
}

// Compare reports, for each path changed in any of the Worlds, which Worlds
// changed it and which hold identical versions (type, mode and content, as
// the World's merged view shows it). Adopting one World's version of a path
// is an Apply of that World with a Pick of the path.
func (e *Engine) Compare(ctx context.Context, names []string) (*Comparison, error) {
	if len(names) < 2 {
		return nil, fmt.Errorf("compare: name two Worlds or more")
	}
	ws := make([]*World, len(names))
	changed := map[string][]string{}
	for i, n := range names {
		if slices.Index(names, n) != i {
			return nil, fmt.Errorf("compare: world %q named twice", n)
		}
		w, err := e.World(n)
		if err != nil {
			return nil, err
		}
		if i > 0 && w.Source != ws[0].Source {
			return nil, fmt.Errorf("compare: world %q is over %s, world %q over %s: only Worlds of one source compare", n, w.Source, names[0], ws[0].Source)
		}
		ws[i] = w
		cs, err := e.Changes(ctx, w, false)
		if err != nil {
			return nil, err
		}
		for _, c := range cs.Changes {
			changed[c.Path] = append(changed[c.Path], n)
		}
	}
	paths := make([]string, 0, len(changed))
	for p := range changed {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	cmp := &Comparison{Worlds: names, Source: ws[0].Source, Paths: make([]ComparedPath, 0, len(paths))}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		src, err := readSide(ws[0].Source, p)
		if err != nil {
			return nil, fmt.Errorf("compare %s: source: %w", p, err)
		}
		cp := ComparedPath{Path: p, ChangedBy: changed[p]}
		byKey := map[string]int{}
		for _, w := range ws {
			v, err := worldSide(w.Layers(e.Paths), p)
			if err != nil {
				return nil, fmt.Errorf("compare %s in world %q: %w", p, w.Name, err)
			}
			key := versionKey(v)
			i, ok := byKey[key]
			if !ok {
				i = len(cp.Versions)
				byKey[key] = i
				cp.Versions = append(cp.Versions, describeVersion(v, key == versionKey(src)))
			}
			cp.Versions[i].Worlds = append(cp.Versions[i].Worlds, w.Name)
		}
		cp.Agree = len(cp.Versions) == 1
		if cp.Agree {
			cmp.Agreed++
		} else {
			cmp.Disagreed++
		}
		cmp.Paths = append(cmp.Paths, cp)
	}
	return cmp, nil
}

func versionKey(v version) string {
	if v.typ == 0 {
		return "absent"
	}
	return fmt.Sprintf("%d:%o:%s", v.typ, v.mode, v.hash())
}

func describeVersion(v version, isSource bool) ComparedVersion {
	cv := ComparedVersion{Type: "absent", Source: isSource}
	if v.typ == 0 {
		return cv
	}
	cv.Type, cv.Hash, cv.Target = v.typ.String(), v.hash(), v.target
	cv.Mode = fmt.Sprintf("%04o", fsx.UnixMode(v.mode))
	cv.Size = int64(len(v.data))
	return cv
}

// MarshalJSON keeps a path's exact bytes (overlay.JSONPath).
func (c ComparedPath) MarshalJSON() ([]byte, error) {
	type plain ComparedPath
	v := plain(c)
	v.Path, v.PathBytes = overlay.JSONPath(c.Path)
	return json.Marshal(v)
}
