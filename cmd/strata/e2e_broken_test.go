package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lsEntry is the part of `strata ls --json` these tests read.
type lsEntry struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Status   string `json:"status"`
	Error    string `json:"error"`
	Sessions int    `json:"sessions"`
}

func (e *env) lsJSON() map[string]lsEntry {
	e.t.Helper()
	var ls []lsEntry
	if err := json.Unmarshal([]byte(e.ok("ls", "--all", "--json")), &ls); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]lsEntry{}
	for _, l := range ls {
		out[l.Name] = l
	}
	return out
}

// A World whose world.toml a crash truncated, someone overwrote or edited
// wrongly is shown as broken (never hidden), refuses every other command
// with the reason, and is removable with all its state.
func TestE2EBrokenWorldToml(t *testing.T) {
	t.Parallel()
	corruptions := []struct {
		name, content, wantErr string
	}{
		{"truncated", "", "world.toml"},
		{"garbage", "\x00\x01 not toml at all [[[\n", "world.toml"},
		{"wrong-types", "id = 7\nname = [\"x\"]\nsource = 3\n", "world.toml"},
		{"no-source", "", "no source"},
		{"no-name", "", "no name"},
	}
	e := newEnv(t)
	for _, c := range corruptions {
		e.ok("new", c.name)
		e.ok("exec", c.name, "--", "sh", "-c", "echo work > new.txt")
		path := filepath.Join(e.home, "worlds", c.name, "world.toml")
		content := c.content
		orig, err := os.ReadFile(path)
		must(t, err)
		switch c.name {
		case "truncated":
			content = string(orig[:len(orig)/3])
		case "no-source", "no-name":
			var keep []string
			for _, line := range strings.Split(string(orig), "\n") {
				if (c.name == "no-source" && strings.HasPrefix(line, "source")) || (c.name == "no-name" && strings.HasPrefix(line, "name")) {
					continue
				}
				keep = append(keep, line)
			}
			content = strings.Join(keep, "\n")
		}
		must(t, os.WriteFile(path, []byte(content), 0o644))
	}
	e.ok("new", "good")

	out, errs, code := e.run("ls", "--all")
	if code != 0 {
		t.Fatalf("ls with broken Worlds: exit %d: %s", code, errs)
	}
	for _, c := range corruptions {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, c.name+" ") {
				line = l
			}
		}
		if !strings.Contains(line, "broken") || !strings.Contains(line, c.wantErr) {
			t.Errorf("ls does not show %s as broken with its error (%q): %q\n%s", c.name, c.wantErr, line, out)
		}
	}
	if !strings.Contains(out, "good ") {
		t.Errorf("ls lost the healthy World: %s", out)
	}
	// ls in the source dir (no --all) shows them too: their source is unknown.
	if out := e.ok("ls"); !strings.Contains(out, "truncated") {
		t.Errorf("ls over the source hides a broken World: %s", out)
	}
	ls := e.lsJSON()
	for _, c := range corruptions {
		l, ok := ls[c.name]
		if !ok || l.State != "broken" || l.Status != "broken" || !strings.Contains(l.Error, c.wantErr) {
			t.Errorf("ls --json %s: %+v (present %v), want state broken and an error containing %q", c.name, l, ok, c.wantErr)
		}
		if l.Sessions != 1 {
			t.Errorf("ls --json %s: %d sessions, want the 1 it ran", c.name, l.Sessions)
		}
	}
	if ls["good"].State != "ready" {
		t.Errorf("healthy World: %+v", ls["good"])
	}

	show := e.ok("show", "garbage")
	if !strings.Contains(show, "broken") || !strings.Contains(show, "world.toml") || !strings.Contains(show, "rm --purge garbage") {
		t.Errorf("show of a broken World does not say what is wrong and what to do: %s", show)
	}
	var sj lsEntry
	must(t, json.Unmarshal([]byte(e.ok("show", "garbage", "--json")), &sj))
	if sj.State != "broken" || sj.Error == "" {
		t.Errorf("show --json: %+v", sj)
	}
	// Every other command fails with the reason and the way out.
	for _, args := range [][]string{
		{"status", "garbage"},
		{"exec", "garbage", "--", "true"},
		{"diff", "garbage"},
		{"snap", "garbage"},
		{"apply", "garbage"},
		{"rollback", "garbage", "HEAD"},
		{"fork", "garbage"},
	} {
		errs := e.fails(1, "is broken", args...)
		if !strings.Contains(errs, "strata rm --purge garbage") {
			t.Errorf("strata %v on a broken World does not say how to get out: %s", args, errs)
		}
	}

	// rm works without --force and without --purge (to the trash), and
	// --purge removes everything the World had.
	e.ok("rm", "truncated")
	if _, err := os.Lstat(filepath.Join(e.home, "worlds", "truncated")); !os.IsNotExist(err) {
		t.Errorf("rm left the broken World's dir: %v", err)
	}
	if !strings.Contains(e.ok("trash"), "truncated") {
		t.Error("plain rm of a broken World did not keep it in the trash")
	}
	for _, c := range corruptions[1:] {
		e.ok("rm", "--purge", c.name)
		if _, err := os.Lstat(filepath.Join(e.home, "worlds", c.name)); !os.IsNotExist(err) {
			t.Errorf("rm --purge %s left its state dir: %v", c.name, err)
		}
		if strings.Contains(e.ok("trash"), c.name) {
			t.Errorf("purged broken World %s is in the trash", c.name)
		}
	}
	ls = e.lsJSON()
	if len(ls) != 1 || ls["good"].Name != "good" {
		t.Errorf("after removal ls shows %v, want only good", ls)
	}
	// The name is free again.
	e.ok("new", "garbage")
	e.ok("exec", "garbage", "--", "true")
}

// A session whose meta.json is corrupt is listed as broken, counted, and
// its transcript is still printed.
func TestE2EBrokenSessionMeta(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo evidence-of-work")
	e.ok("exec", "w", "--", "true")
	var ss []struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
	}
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	if len(ss) != 2 {
		t.Fatalf("sessions: %+v", ss)
	}
	first := ss[0].ID
	must(t, os.WriteFile(filepath.Join(e.home, "worlds", "w", "sessions", first, "meta.json"), []byte(`{"id": "`+first+`", "argv": [`), 0o644))

	ss = nil
	must(t, json.Unmarshal([]byte(e.ok("sessions", "w", "--json")), &ss))
	if len(ss) != 2 || ss[0].ID != first || ss[0].State != "broken" || !strings.Contains(ss[0].Error, "meta") {
		t.Fatalf("sessions --json with a corrupt meta.json: %+v", ss)
	}
	out := e.ok("sessions", "w")
	if !strings.Contains(out, first) || !strings.Contains(out, "broken") {
		t.Errorf("sessions does not show the broken session: %s", out)
	}
	if got := e.ok("logs", "w", first); !strings.Contains(got, "evidence-of-work") {
		t.Errorf("logs of a broken session: %q", got)
	}
	if got := e.ok("logs", "w", first, "-f"); !strings.Contains(got, "evidence-of-work") {
		t.Errorf("logs -f of a broken session: %q", got)
	}
	if l := e.lsJSON()["w"]; l.Sessions != 2 {
		t.Errorf("ls counts %d sessions, want 2 (one broken)", l.Sessions)
	}
	// The World still works, and its removal takes the broken session too.
	e.ok("exec", "w", "--", "true")
	e.ok("rm", "w", "--purge")
}

// pubID is a publication id for root as overlay names them:
// <first 16 hex of sha256(root)>-<16 hex>.
func pubID(t *testing.T, root, suffix string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(root)
	must(t, err)
	sum := sha256.Sum256([]byte(real))
	return hex.EncodeToString(sum[:])[:16] + "-" + suffix
}

// writeJournal writes a well-formed, correctly checksummed journal, as a
// crafted one would be, renaming temp onto target in root.
func writeJournal(t *testing.T, journalDir, id, root, temp, target, content string) {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	body, err := json.Marshal(map[string]any{
		"version": 1, "id": id, "root": root, "created": "2026-01-01T00:00:00Z",
		"steps": []map[string]any{{"op": "rename", "path": target, "temp": temp, "type": "file", "sha256": hex.EncodeToString(sum[:])}},
	})
	must(t, err)
	bs := sha256.Sum256(body)
	env, err := json.Marshal(map[string]any{"checksum": "sha256:" + hex.EncodeToString(bs[:]), "body": json.RawMessage(body)})
	must(t, err)
	must(t, os.MkdirAll(journalDir, 0o700))
	must(t, os.WriteFile(filepath.Join(journalDir, id+".json"), env, 0o600))
}

// A corrupt journal blocks apply with a clear message; doctor explains it;
// doctor --repair discards it, removing exactly the temps it staged in the
// source (found by their reserved names), and apply works again.
func TestE2EDoctorRepairCorruptJournal(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	e.ok("exec", "w", "--", "sh", "-c", "echo changed > a.txt")
	e.ok("apply", "w", "--dry-run") // bases captured while the source is pristine
	src, err := filepath.EvalSymlinks(e.source)
	must(t, err)
	id := pubID(t, src, "00112233445566aa")
	other := pubID(t, src, "ffeeddccbbaa9988")
	journalDir := filepath.Join(e.home, "journal")
	must(t, os.MkdirAll(journalDir, 0o700))
	jpath := filepath.Join(journalDir, id+".json")
	must(t, os.WriteFile(jpath, []byte(`{"checksum":"sha256:00","body":{"version":1,"id":"`+id+`","root":"`), 0o600))
	// What a torn publication left in the source: a staged file and a staged
	// directory. Beside them, names the repair must not touch.
	staged := []string{".strata-pub-" + id + "-1", "sub/.strata-pub-" + id + "-2"}
	must(t, os.WriteFile(filepath.Join(src, staged[0]), []byte("torn"), 0o644))
	must(t, os.MkdirAll(filepath.Join(src, staged[1], "inner"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, staged[1], "inner", "f"), []byte("torn"), 0o644))
	keep := []string{".strata-pub-" + other + "-1", ".strata-pub-notes", "sub/b.txt", "keep.txt", "a.txt"}
	must(t, os.WriteFile(filepath.Join(src, keep[0]), []byte("another publication's"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, keep[1]), []byte("user file"), 0o644))

	errs := e.fails(1, "doctor --repair", "apply", "w")
	if !strings.Contains(errs, "corrupt publication journal") || !strings.Contains(errs, "nothing was written") {
		t.Errorf("apply over a corrupt journal: %s", errs)
	}
	if got := e.readSource("a.txt"); got != "hello\n" {
		t.Fatalf("apply wrote over a corrupt journal: %q", got)
	}

	out, _, code := e.run("doctor")
	if code != 1 || !strings.Contains(out, id) || !strings.Contains(out, "corrupt") || !strings.Contains(out, "--repair") ||
		!strings.Contains(out, src) || !strings.Contains(out, staged[1]) {
		t.Errorf("doctor (exit %d) does not explain the corrupt journal (id, source, staged files, --repair):\n%s", code, out)
	}

	var dry struct {
		DryRun       bool `json:"dry_run"`
		Publications []struct {
			ID, Root, State, Action string
			Temps, Removed          []string
		} `json:"publications"`
	}
	must(t, json.Unmarshal([]byte(e.ok("doctor", "--repair", "--dry-run", "--json")), &dry))
	if !dry.DryRun || len(dry.Publications) != 1 || dry.Publications[0].Action != "would_discarded" ||
		dry.Publications[0].Root != src || strings.Join(dry.Publications[0].Temps, ",") != strings.Join(staged, ",") {
		t.Fatalf("doctor --repair --dry-run --json: %+v", dry)
	}
	for _, s := range staged {
		if _, err := os.Lstat(filepath.Join(src, s)); err != nil {
			t.Fatalf("dry run removed %s: %v", s, err)
		}
	}

	out = e.ok("doctor", "--repair")
	if !strings.Contains(out, "discarded") || !strings.Contains(out, staged[0]) {
		t.Errorf("doctor --repair output: %s", out)
	}
	for _, s := range staged {
		if _, err := os.Lstat(filepath.Join(src, s)); !os.IsNotExist(err) {
			t.Errorf("repair left staged %s: %v", s, err)
		}
	}
	for _, k := range keep {
		if _, err := os.Lstat(filepath.Join(src, k)); err != nil {
			t.Errorf("repair removed %s, which the journal did not stage: %v", k, err)
		}
	}
	if _, err := os.Lstat(jpath); !os.IsNotExist(err) {
		t.Errorf("repair left the journal: %v", err)
	}
	if out := e.ok("doctor", "--repair"); !strings.Contains(out, "no unfinished publications") {
		t.Errorf("second repair: %s", out)
	}
	e.ok("apply", "w")
	if got := e.readSource("a.txt"); got != "changed\n" {
		t.Errorf("apply after repair: a.txt = %q", got)
	}
}

// A journal naming a directory no World of this state root uses (crafted,
// or corrupt) is never replayed: not when strata starts, not by apply, not
// by doctor --repair, which reports it refused.
func TestE2EForeignJournalRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ok("new", "w")
	foreign := filepath.Join(t.TempDir(), "etc")
	must(t, os.MkdirAll(foreign, 0o755))
	foreign, _ = filepath.EvalSymlinks(foreign)
	must(t, os.WriteFile(filepath.Join(foreign, "passwd"), []byte("root:x:0:0\n"), 0o644))
	id := pubID(t, foreign, "0badc0de0badc0de")
	temp := ".strata-pub-" + id + "-1"
	must(t, os.WriteFile(filepath.Join(foreign, temp), []byte("evil::0:0\n"), 0o644))
	journalDir := filepath.Join(e.home, "journal")
	writeJournal(t, journalDir, id, foreign, temp, "passwd", "evil::0:0\n")
	// A second one wears the id of the real source but names the foreign dir.
	src, _ := filepath.EvalSymlinks(e.source)
	id2 := pubID(t, src, "0badc0de0badc0df")
	temp2 := ".strata-pub-" + id2 + "-1"
	must(t, os.WriteFile(filepath.Join(foreign, temp2), []byte("evil::0:0\n"), 0o644))
	writeJournal(t, journalDir, id2, foreign, temp2, "passwd", "evil::0:0\n")

	unchanged := func(when string) {
		t.Helper()
		if b, _ := os.ReadFile(filepath.Join(foreign, "passwd")); string(b) != "root:x:0:0\n" {
			t.Fatalf("%s: the foreign directory was written: passwd = %q", when, b)
		}
		for _, tmp := range []string{temp, temp2} {
			if _, err := os.Lstat(filepath.Join(foreign, tmp)); err != nil {
				t.Fatalf("%s: a file in the foreign directory was removed: %v", when, err)
			}
		}
	}
	e.ok("ls") // every start recovers
	unchanged("start")
	e.ok("exec", "w", "--", "sh", "-c", "echo changed > a.txt")
	// Publishing to the real source first recovers its journals: the one
	// that wears its id but names another directory is corrupt, and blocks.
	e.fails(1, "does not match the publication id", "apply", "w")
	unchanged("apply")

	out, _, code := e.run("doctor")
	if code != 1 || !strings.Contains(out, id) || !strings.Contains(out, "no World of this state root uses") {
		t.Errorf("doctor (exit %d) does not report the foreign journal:\n%s", code, out)
	}
	var rep struct {
		Publications []struct{ ID, State, Action string } `json:"publications"`
	}
	stdout, _, code := e.run("doctor", "--repair", "--json")
	must(t, json.Unmarshal([]byte(stdout), &rep))
	if code != 1 {
		t.Errorf("doctor --repair with a refused journal: exit %d, want 1", code)
	}
	actions := map[string]string{}
	for _, p := range rep.Publications {
		actions[p.ID] = p.State + "/" + p.Action
	}
	if actions[id] != "foreign/refused" || actions[id2] != "corrupt/discarded" {
		t.Errorf("foreign journal, mismatched journal: %v", actions)
	}
	unchanged("repair")
	if _, err := os.Lstat(filepath.Join(journalDir, id+".json")); err != nil {
		t.Errorf("the refused journal was removed: %v", err)
	}
	e.ok("apply", "w")
	unchanged("apply after repair")
	if got := e.readSource("a.txt"); got != "changed\n" {
		t.Errorf("apply to the real source: a.txt = %q", got)
	}
}
