package main

import "runtime/debug"

// version is stamped by make (-ldflags "-X main.version=..."); empty when
// built otherwise.
var version string

// versionString is the version a person sees: the stamped one, else the
// module version `go install ...@VERSION` recorded, else the VCS revision go
// build recorded, else "dev".
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		return "dev-" + rev + dirty
	}
	return "dev"
}
