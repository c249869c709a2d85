package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratahq/strata/overlay"
)

func snaptSampleManifest() *Manifest {
	obj := ObjectID(strings.Repeat("ab", 32))
	m := &Manifest{
		Version: ManifestVersion,
		Dialect: overlay.DialectFuseOverlayfs,
		Root:    ManifestEntry{Kind: EntryDir, Mode: 0o755, MTime: 1, Opaque: true},
		Entries: []ManifestEntry{
			{Path: "-leading-dash", Kind: EntryFile, Mode: 0o6755, Size: 3, MTime: 1741064767891011121, UID: 1234, GID: 5678, Object: obj},
			{Path: "a dir", Kind: EntryDir, Mode: 0o1777, Opaque: true, Xattrs: map[string][]byte{"user.x": []byte("v\x00\xff\n"), "user.a": nil}},
			{Path: "a dir/link", Kind: EntrySymlink, Mode: 0o777, Target: "../\xff\xfetarget \"q\"\n"},
			{Path: "a dir/wh", Kind: EntryWhiteout},
			{Path: "dev", Kind: EntryOther, Mode: 0o020000 | 0o600, Rdev: 259},
			{Path: "new\nline", Kind: EntryFile, Mode: 0, Object: obj},
			{Path: "\xff\xfe", Kind: EntryFile, Mode: 0o644, Object: obj},
		},
	}
	// decoding yields empty maps as nil-valued slices; keep the sample canonical
	m.Entries[1].Xattrs["user.a"] = []byte{}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	m := snaptSampleManifest()
	p := filepath.Join(t.TempDir(), "snap.manifest")
	snaptMust(t, WriteManifest(p, m))
	got, err := ReadManifest(p)
	snaptMust(t, err)
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
	}
	if e := got.Lookup("new\nline"); e == nil || e.Mode != 0 {
		t.Errorf("Lookup: %+v", e)
	}
	if got.Lookup("missing") != nil {
		t.Error("Lookup of a missing path")
	}
	n := 0
	for id := range got.Objects() {
		if id != got.Entries[0].Object {
			t.Errorf("Objects yielded %s", id)
		}
		n++
	}
	if n != 3 {
		t.Errorf("Objects yielded %d ids, want 3", n)
	}
	modes := map[string]fs.FileMode{
		"-leading-dash": 0o755 | fs.ModeSetuid | fs.ModeSetgid,
		"a dir":         0o777 | fs.ModeDir | fs.ModeSticky,
		"a dir/link":    0o777 | fs.ModeSymlink,
		"a dir/wh":      fs.ModeDevice | fs.ModeCharDevice,
		"dev":           0o600 | fs.ModeDevice | fs.ModeCharDevice,
	}
	for p, want := range modes {
		if got := got.Lookup(p).FileMode(); got != want {
			t.Errorf("%q FileMode = %v, want %v", p, got, want)
		}
	}
}

func TestManifestDetectsDamage(t *testing.T) {
	data, err := EncodeManifest(snaptSampleManifest())
	snaptMust(t, err)
	// Every truncation is caught.
	for n := range len(data) {
		_, err := DecodeManifest("m", data[:n])
		var cme *CorruptManifestError
		if !errors.As(err, &cme) || cme.Path != "m" {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
	// So is any flipped byte.
	for i := 0; i < len(data); i += 7 {
		bad := bytes.Clone(data)
		bad[i] ^= 0x20
		if _, err := DecodeManifest("m", bad); err == nil {
			t.Fatalf("byte %d flipped: no error", i)
		}
	}
	// A checksum-valid manifest naming a path outside the upper is refused.
	evil := snaptSampleManifest()
	evil.Entries = []ManifestEntry{{Path: "../escape", Kind: EntryDir}}
	if _, err := EncodeManifest(evil); err == nil {
		t.Error("encoded ../escape")
	}
	good, err := EncodeManifest(&Manifest{Dialect: overlay.DialectKernel, Entries: []ManifestEntry{{Path: "x.escape", Kind: EntryDir}}})
	snaptMust(t, err)
	forged := reseal(t, bytes.Replace(good, []byte(`"x.escape"`), []byte(`"../escape"`), 1))
	var cme *CorruptManifestError
	if _, err := DecodeManifest("m", forged); !errors.As(err, &cme) || !strings.Contains(cme.Reason, "invalid path") {
		t.Errorf("forged ../ path: err = %v", err)
	}
}

// reseal recomputes the checksum trailer of an edited manifest.
func reseal(t *testing.T, data []byte) []byte {
	t.Helper()
	cut := bytes.LastIndex(data[:len(data)-1], []byte("\n"))
	return snaptSeal(data[:cut+1])
}

// snaptSeal appends a valid trailer to a manifest body.
func snaptSeal(body []byte) []byte {
	body = bytes.Clone(body)
	sum := sha256.Sum256(body)
	entries := bytes.Count(body, []byte("\n")) - 2
	return fmt.Appendf(body, "sum %d %s\n", entries, hex.EncodeToString(sum[:]))
}

func TestDiffManifests(t *testing.T) {
	a := snaptSampleManifest()
	b := snaptSampleManifest()
	b.Entries = append([]ManifestEntry(nil), b.Entries...)
	b.Entries[0].Object = ObjectID(strings.Repeat("cd", 32)) // content
	b.Entries[0].Mode = 0o755                                // and mode
	b.Entries[1].Opaque = false                              // opaque
	b.Entries[2].Target = "elsewhere"                        // target
	b.Entries[3] = ManifestEntry{Path: "a dir/wh", Kind: EntryFile, Object: b.Entries[0].Object}
	b.Entries = append(b.Entries[:4], b.Entries[5:]...) // "dev" removed
	b.Entries = append(b.Entries, ManifestEntry{Path: "\xff\xff added", Kind: EntryDir})
	b.Entries[4].MTime = 99 // times alone are not a change
	got := DiffManifests(a, b)
	want := map[string]DeltaKind{
		"-leading-dash":  DeltaContent | DeltaMode,
		"a dir":          DeltaOpaque,
		"a dir/link":     DeltaTarget,
		"a dir/wh":       DeltaType,
		"dev":            DeltaRemoved,
		"\xff\xff added": DeltaAdded,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d deltas: %+v", len(got), got)
	}
	for i, d := range got {
		if want[d.Path] != d.Change {
			t.Errorf("%q: %v, want %v", d.Path, d.Change, want[d.Path])
		}
		if i > 0 && got[i-1].Path >= d.Path {
			t.Errorf("not sorted at %q", d.Path)
		}
	}
	if s := (DeltaContent | DeltaMode).String(); s != "content,mode" {
		t.Errorf("String = %q", s)
	}
	if len(DiffManifests(a, a)) != 0 {
		t.Error("a manifest differs from itself")
	}
}

func FuzzDecodeManifest(f *testing.F) {
	data, err := EncodeManifest(snaptSampleManifest())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("strata-manifest 1\ndialect \"\"\nd 755 0 0 0 0 - - 0 \"\" \"\"\nsum 1 00\n"))
	f.Add([]byte("strata-manifest 1\ndialect \"kernel\"\nd 755 0 0 0 0 - - 0 \"\" \"\"\nf 644 0 0 1 2 " + strings.Repeat("0", 64) + " - 0 \"a\\n\" \"\" \"user.x\" \"\\xff\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		snaptFuzzDecode(t, data)
		// Most inputs fail the checksum; seal them so the parser behind it is exercised too.
		if bytes.HasSuffix(data, []byte("\n")) {
			snaptFuzzDecode(t, snaptSeal(data))
		}
	})
}

func snaptFuzzDecode(t *testing.T, data []byte) {
	{
		m, err := DecodeManifest("fuzz", data)
		if err != nil {
			var cme *CorruptManifestError
			if !errors.As(err, &cme) {
				t.Fatalf("error is not a CorruptManifestError: %v", err)
			}
			return
		}
		// Whatever decodes re-encodes to a manifest that decodes the same.
		again, err := EncodeManifest(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		m2, err := DecodeManifest("again", again)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode: %v", err)
		}
		for _, e := range m.Entries {
			if validManifestPath(e.Path) != nil {
				t.Fatalf("accepted path %q", e.Path)
			}
		}
	}
}
