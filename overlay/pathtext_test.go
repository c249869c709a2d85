package overlay

import (
	"encoding/json"
	"testing"
)

// Every name survives the quoted form and the JSON form byte for byte, and
// two names never share a JSON form.
func FuzzPathText(f *testing.F) {
	for _, s := range []string{"a.txt", "a\xff", "a\xfe", "a\ufffd", `"a\xff"`, "tab\there", "back\\slash", "é/ü", "\x7f", ""} {
		f.Add(s, "a\xff")
	}
	f.Fuzz(func(t *testing.T, p, other string) {
		q := QuotePath(p)
		if back, _ := UnquotePath(q); back != p {
			t.Fatalf("QuotePath(%q) = %q reads back as %q", p, q, back)
		}
		js, jb := JSONPath(p)
		data, err := json.Marshal(struct {
			Path      string `json:"path"`
			PathBytes []byte `json:"path_bytes,omitempty"`
		}{js, jb})
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Path      string `json:"path"`
			PathBytes []byte `json:"path_bytes"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		if got := PathFromJSON(v.Path, v.PathBytes); got != p {
			t.Fatalf("%q through JSON %s is %q", p, data, got)
		}
		if p != other {
			os, ob := JSONPath(other)
			if os == js && string(ob) == string(jb) && (ob == nil) == (jb == nil) {
				t.Fatalf("%q and %q share the JSON form %s", p, other, data)
			}
		}
	})
}

func TestPathTextExamples(t *testing.T) {
	if q := QuotePath("a\xff"); q != `"a\xff"` {
		t.Fatalf("QuotePath(a\\xff) = %s", q)
	}
	if p, ok := UnquotePath(`"a\xfe"`); !ok || p != "a\xfe" {
		t.Fatalf("UnquotePath = %q %v", p, ok)
	}
	if p, ok := UnquotePath("plain"); ok || p != "plain" {
		t.Fatalf("UnquotePath(plain) = %q %v", p, ok)
	}
	a, ab := JSONPath("a\xff")
	b, bb := JSONPath("a\xfe")
	if a == b || string(ab) == string(bb) {
		t.Fatalf("a\\xff and a\\xfe: %q %q / %q %q", a, b, ab, bb)
	}
}
