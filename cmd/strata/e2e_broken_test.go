package main

import (
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
