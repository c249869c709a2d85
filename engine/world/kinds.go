package world

import (
	"fmt"
	"strings"
)

// Isolation says how much of the host a session's command can change.
//
// Adding a level is one line in isolations plus its implementation in the
// session init.
type Isolation string

const (
	// IsolationTree shows the World at the source path and hides strata's state;
	// the rest of the host is as it is, so toolchains and caches work.
	IsolationTree Isolation = "tree"
	// IsolationStrict makes the whole host read-only except the World, a private
	// /tmp and the read-write binds of the spec.
	IsolationStrict Isolation = "strict"
	// IsolationSandbox is the default: the host read-only but the World,
	// private temp dirs, a per-World layer over the home and declared shared
	// caches; credentials hidden, the environment scrubbed, egress by policy
	// (engine/boundary).
	IsolationSandbox Isolation = "sandbox"
)

// DefaultIsolation is a World's level when neither it nor the config says.
const DefaultIsolation = IsolationSandbox

// isolations lists every isolation level, the default first.
var isolations = []Isolation{IsolationSandbox, IsolationTree, IsolationStrict}

// Isolations returns every isolation level, the default first.
func Isolations() []Isolation { return append([]Isolation(nil), isolations...) }

// IsolationNames returns the levels' names, for usage text and completion.
func IsolationNames() []string { return names(isolations) }

// ParseIsolation returns the level named s; "" is the default (sandbox).
func ParseIsolation(s string) (Isolation, error) {
	if s == "" {
		return isolations[0], nil
	}
	i := Isolation(s)
	return i, i.Validate()
}

// Validate reports whether i is a known level ("" is not).
func (i Isolation) Validate() error {
	for _, k := range isolations {
		if i == k {
			return nil
		}
	}
	return fmt.Errorf("%q: want %s", string(i), orList(names(isolations)))
}

// Runtime names where a World's sessions run: its execution backend.
//
// Adding one is a line in runtimes plus an implementation of the runtime
// seam (engine/runtime.go).
type Runtime string

const (
	RuntimeLocal Runtime = "local"
	RuntimeCube  Runtime = "cube"
)

// DefaultRuntime is a new World's runtime when neither it nor the config says.
const DefaultRuntime = RuntimeLocal

// runtimes lists every runtime, the default first.
var runtimes = []Runtime{RuntimeLocal, RuntimeCube}

// Runtimes returns every runtime, the default first.
func Runtimes() []Runtime { return append([]Runtime(nil), runtimes...) }

// RuntimeNames returns the runtimes' names, for usage text and completion.
func RuntimeNames() []string { return names(runtimes) }

// ParseRuntime returns the runtime named s; "" is the default (local).
func ParseRuntime(s string) (Runtime, error) {
	if s == "" {
		return runtimes[0], nil
	}
	r := Runtime(s)
	return r, r.Validate()
}

// Validate reports whether r is a known runtime ("" is not).
func (r Runtime) Validate() error {
	for _, k := range runtimes {
		if r == k {
			return nil
		}
	}
	return fmt.Errorf("%q: want %s", string(r), orList(names(runtimes)))
}

func names[T ~string](ks []T) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// orList joins "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
