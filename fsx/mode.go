package fsx

import "io/fs"

// PermBits are the permission bits plus setuid, setgid and sticky: what a
// change compares and what chmod takes.
const PermBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// Unix octal special bits (S_ISUID, S_ISGID, S_ISVTX).
const (
	unixSetuid = 0o4000
	unixSetgid = 0o2000
	unixSticky = 0o1000
)

// UnixMode turns the permission and special bits of m into the unix octal
// layout chmod and st_mode use (0o4755 for a setuid 0755); type bits are
// dropped.
func UnixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= unixSetuid
	}
	if m&fs.ModeSetgid != 0 {
		u |= unixSetgid
	}
	if m&fs.ModeSticky != 0 {
		u |= unixSticky
	}
	return u
}

// FileMode is the inverse of UnixMode: the permission and special bits of
// the unix octal mode u as an fs.FileMode; type bits in u are ignored.
func FileMode(u uint32) fs.FileMode {
	m := fs.FileMode(u & 0o777)
	if u&unixSetuid != 0 {
		m |= fs.ModeSetuid
	}
	if u&unixSetgid != 0 {
		m |= fs.ModeSetgid
	}
	if u&unixSticky != 0 {
		m |= fs.ModeSticky
	}
	return m
}
