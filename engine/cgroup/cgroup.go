// Package cgroup is strata's cgroup v2 tree (strata/<world>@<id>/<session>
// under the writable cgroup2 mount): making a session's cgroup, joining it,
// freezing and thawing a World's sessions, reading usage, and sweeping the
// cgroups of ended sessions and removed Worlds. Without a writable cgroup2
// hierarchy every function is a no-op and strata falls back to /proc and
// SIGSTOP.
package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratahq/strata/engine/world"
)

// Disabled makes strata account with /proc only and freeze with SIGSTOP
// (tests of the fallback).
var Disabled atomic.Bool

var (
	rootOnce sync.Once
	rootDir  string
)

// V2Root is the cgroup v2 hierarchy strata can create cgroups in:
// /sys/fs/cgroup on a unified system, /sys/fs/cgroup/unified on a hybrid one
// (CPU time and the freezer work there even without controllers); "" when
// there is none or it is not writable.
func V2Root() string {
	if Disabled.Load() {
		return ""
	}
	rootOnce.Do(func() {
		for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
			var sfs unix.Statfs_t
			if unix.Statfs(d, &sfs) != nil || sfs.Type != unix.CGROUP2_SUPER_MAGIC {
				continue
			}
			if unix.Access(d, unix.W_OK) != nil {
				continue
			}
			rootDir = d
			return
		}
	})
	return rootDir
}

// WorldDir is strata/<name>@<id> under the cgroup v2 root ("" without
// one): the id keeps two state roots' Worlds of one name, or a World and its
// removed namesake, apart.
func WorldDir(w *world.World) string {
	root := V2Root()
	if root == "" {
		return ""
	}
	return filepath.Join(root, "strata", w.Name+"@"+w.ID)
}

// PrepareSession makes strata/<name>@<id>/<session> and returns it, or
// "" when cgroups cannot be used (then resources come from /proc).
func PrepareSession(w *world.World, session string) string {
	return prepareSession(w, session, 3)
}

func prepareSession(w *world.World, session string, retry int) string {
	wdir := prepareWorld(w)
	if wdir == "" {
		return ""
	}
	dir := filepath.Join(wdir, session)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrNotExist) && retry > 0 {
			// Another World's sweep took our World's cgroup between the
			// two mkdirs (it was empty and, had the clock jumped, not
			// young): make it again.
			return prepareSession(w, session, retry-1)
		}
		return ""
	}
	return dir
}

// ResidentPrefix starts the name of a resident init's cgroup in its World's
// (strata/<world>@<id>/r-<random>): the init in r-*/init, the sessions it
// runs in r-*/<session>, under a cgroup namespace rooted at r-*.
const ResidentPrefix = "r-"

// PrepareResident makes a cgroup for a World's resident init and returns
// it, or "" when cgroups cannot be used.
func PrepareResident(w *world.World) string {
	for range 3 {
		wdir := prepareWorld(w)
		if wdir == "" {
			return ""
		}
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return ""
		}
		dir := filepath.Join(wdir, ResidentPrefix+hex.EncodeToString(b[:]))
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return ""
		}
	}
	return ""
}

// SessionDir is the cgroup of a World's session: strata/<world>@<id>/<id>,
// or under the resident init that ran it; "" when it has none.
func SessionDir(w *world.World, session string) string {
	wdir := WorldDir(w)
	if wdir == "" {
		return ""
	}
	d := filepath.Join(wdir, session)
	if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
		return d
	}
	ms, _ := filepath.Glob(filepath.Join(wdir, ResidentPrefix+"*", session))
	if len(ms) > 0 {
		return ms[0]
	}
	return ""
}

// prepareWorld makes strata/ and strata/<world>@<id>, handing controllers
// down, and returns the World's cgroup ("" without cgroups).
func prepareWorld(w *world.World) string {
	wdir := WorldDir(w)
	if wdir == "" {
		return ""
	}
	for _, d := range []string{filepath.Dir(wdir), wdir} {
		if err := os.Mkdir(d, 0o755); err == nil {
			// Hand the controllers the parent has down (best effort: where the
			// memory or pids controller is not available, /proc fills in).
			for _, c := range []string{"+cpu", "+memory", "+pids"} {
				_ = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(c), 0)
			}
			if d == wdir {
				sweepIdleWorlds(filepath.Dir(wdir), wdir)
			}
		} else if !errors.Is(err, fs.ErrExist) {
			return ""
		}
	}
	sweepSessions(wdir, 16)
	return wdir
}

// youngFor is how long a new cgroup is left alone by sweeps: a session's
// cgroup is made a moment before its init is cloned into it, and a World's
// a moment before its first session's; empty in between, neither is idle.
var youngFor = 5 * time.Second

// young says the cgroup dir p was made less than youngFor ago.
func young(p string) bool {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return false
	}
	return time.Since(time.Unix(st.Ctim.Unix())) < youngFor
}

// sweepSessions removes the empty cgroups of ended sessions once there
// are more than keep of them; a cgroup that still holds processes refuses
// rmdir (EBUSY) and stays.
func sweepSessions(wdir string, keep int) {
	ents, err := os.ReadDir(wdir)
	if err != nil {
		return
	}
	var subs []string
	for _, d := range ents {
		if d.IsDir() {
			subs = append(subs, d.Name())
		}
	}
	if len(subs) <= keep {
		return
	}
	for _, s := range subs {
		p := filepath.Join(wdir, s)
		if keep >= 0 && young(p) {
			continue
		}
		if strings.HasPrefix(s, ResidentPrefix) {
			// A resident init's: its sessions' cgroups and its own go first;
			// while it runs, its own refuses.
			sweepSessions(p, -1)
		}
		_ = unix.Rmdir(p)
	}
}

// sweepIdleWorlds reclaims the cgroups of Worlds with no live session
// (removed Worlds leave theirs behind; the cgroup tree knows no state root),
// whenever a World gets its first cgroup. A World whose cgroup is reclaimed
// gets a new one with its next session: its CPU time counts from there.
func sweepIdleWorlds(strataDir, keep string) {
	ents, err := os.ReadDir(strataDir)
	if err != nil {
		return
	}
	for _, d := range ents {
		p := filepath.Join(strataDir, d.Name())
		if !d.IsDir() || p == keep || young(p) || hasYoung(p) {
			continue // another World's, about to get (or getting) its session
		}
		sweepSessions(p, -1)
		_ = unix.Rmdir(p)
	}
}

// hasYoung says a World's cgroup dir holds a session cgroup made less than
// youngFor ago.
func hasYoung(wdir string) bool {
	ents, _ := os.ReadDir(wdir)
	for _, d := range ents {
		if d.IsDir() && young(filepath.Join(wdir, d.Name())) {
			return true
		}
	}
	return false
}

// RemoveWorld removes a World's cgroups whose sessions are all gone.
func RemoveWorld(w *world.World) {
	wdir := WorldDir(w)
	if wdir == "" {
		return
	}
	sweepSessions(wdir, -1)
	_ = unix.Rmdir(wdir)
}

// RemoveBrokenWorld removes the cgroups of every World named name
// (its id, part of the cgroup's name, is unknown when world.toml is broken).
func RemoveBrokenWorld(name string) {
	root := V2Root()
	if root == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "strata", name+"@*"))
	for _, wdir := range dirs {
		sweepSessions(wdir, -1)
		_ = unix.Rmdir(wdir)
	}
}

// PIDs lists the processes of a cgroup and its descendants.
func PIDs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// Join moves the calling process into the cgroup dir (the init does
// this when the caller could not start it there).
func Join(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0)
}

// ThawWorld thaws every session cgroup of the World: what Freeze
// froze, and what a freezer that died before thawing left frozen.
func ThawWorld(w *world.World) {
	wdir := WorldDir(w)
	if wdir == "" {
		return
	}
	thawUnder(wdir)
}

func thawUnder(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, d := range ents {
		if d.IsDir() {
			_ = os.WriteFile(filepath.Join(dir, d.Name(), "cgroup.freeze"), []byte("0"), 0)
			if strings.HasPrefix(d.Name(), ResidentPrefix) {
				thawUnder(filepath.Join(dir, d.Name()))
			}
		}
	}
}

// Freeze freezes the given session cgroups of w (its running sessions:
// commands and inits) through the cgroup v2 freezer, and returns the
// function that thaws them; ok is false when the World has no cgroups or a
// session is outside them (use SIGSTOP then). Only session cgroups are
// frozen, never the World's, so a freezer that dies cannot leave new
// sessions born frozen: ThawWorld undoes its leftovers.
func Freeze(w *world.World, sessions []string) (thaw func(), ok bool) {
	wdir := WorldDir(w)
	if wdir == "" {
		return nil, false
	}
	var dirs []string
	for _, id := range sessions {
		d := SessionDir(w, id)
		if d == "" {
			return nil, false
		}
		if _, err := os.Stat(filepath.Join(d, "cgroup.freeze")); err != nil {
			return nil, false // a session outside cgroups: the freezer would miss it
		}
		dirs = append(dirs, d)
	}
	thaw = func() { ThawWorld(w) }
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.freeze"), []byte("1"), 0); err != nil {
			thaw()
			return nil, false
		}
	}
	// Freezing is asynchronous: wait until every cgroup reports it is frozen.
	deadline := time.Now().Add(2 * time.Second)
	for _, d := range dirs {
		for {
			if v, err := ReadKeyedInt(filepath.Join(d, "cgroup.events"), "frozen"); err != nil || v == 1 {
				break // gone (the session ended), or frozen
			}
			if time.Now().After(deadline) {
				thaw()
				return nil, false
			}
			time.Sleep(time.Millisecond)
		}
	}
	return thaw, true
}

// ReadInt reads a file holding one integer (memory.current).
func ReadInt(p string) (int64, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// ReadKeyedInt reads "key value" lines (cpu.stat, cgroup.events).
func ReadKeyedInt(p, key string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", p, key)
}
