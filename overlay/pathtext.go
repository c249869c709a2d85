package overlay

import (
	"strconv"
	"unicode/utf8"
)

// File names are bytes: Linux allows any byte but '/' and NUL, and two
// names that differ only in bytes that are not UTF-8 (a\xff, a\xfe) are two
// Files. Text output and JSON cannot carry such bytes as they are, so they
// travel in one of two forms, defined here once and used everywhere:
//
//   - the quoted form, Go string-literal syntax with the quotes ("a\xff"),
//     used when a name is not printable UTF-8 or holds '"' or '\'. strata
//     prints it and every command taking a PATH accepts it back;
//   - in JSON, "path" holds the name itself when it is valid UTF-8, else the
//     quoted form, and then "path_bytes" holds the exact bytes (base64).

// QuotePath is how a path is shown to a person: as it is when it is
// printable UTF-8 without '"' or '\', else in the quoted form.
func QuotePath(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f || p[i] == '"' || p[i] == '\\' {
			return strconv.Quote(p)
		}
	}
	if !utf8.ValidString(p) {
		return strconv.Quote(p)
	}
	return p
}

// UnquotePath reads a path a person or script passed back: the quoted form
// is unquoted (ok is true), anything else is the path itself.
func UnquotePath(arg string) (string, bool) {
	if len(arg) < 2 || arg[0] != '"' || arg[len(arg)-1] != '"' {
		return arg, false
	}
	p, err := strconv.Unquote(arg)
	if err != nil {
		return arg, false
	}
	return p, true
}

// JSONPath is how a path is written in JSON: the string to put in "path",
// and the exact bytes for "path_bytes" (nil when the path is valid UTF-8,
// and so exact in "path" already).
func JSONPath(p string) (string, []byte) {
	if utf8.ValidString(p) {
		return p, nil
	}
	return strconv.Quote(p), []byte(p)
}

// PathFromJSON is the inverse of JSONPath.
func PathFromJSON(path string, pathBytes []byte) string {
	if pathBytes != nil {
		return string(pathBytes)
	}
	return path
}
