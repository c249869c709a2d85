package fsx

// ValidName reports whether name matches [a-z0-9][a-z0-9._-]{0,62}, the
// rule for World and session names: safe as one path component (never "",
// ".", ".." or hidden, no separator), checked by hand because a regexp
// compiled at start-up costs every strata process (and every session init)
// time.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 63 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}
