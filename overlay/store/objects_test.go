package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func snaptID(data []byte) ObjectID {
	sum := sha256.Sum256(data)
	return ObjectID(hex.EncodeToString(sum[:]))
}

func TestStorePutReadVerify(t *testing.T) {
	s := snaptStore(t)
	data := []byte("hello object store\n")
	id, n, created, err := s.PutBytes(data)
	snaptMust(t, err)
	if id != snaptID(data) || n != int64(len(data)) || !created {
		t.Fatalf("PutBytes = %s %d %v", id, n, created)
	}
	if _, _, created, _ := s.PutBytes(data); created {
		t.Error("second PutBytes of the same content created a new object")
	}
	big := bytes.Repeat([]byte("streamed "), 300_000)
	id2, n2, created2, err := s.Put(bytes.NewReader(big))
	snaptMust(t, err)
	if id2 != snaptID(big) || n2 != int64(len(big)) || !created2 {
		t.Fatalf("Put = %s %d %v", id2, n2, created2)
	}
	if _, _, created, _ := s.Put(bytes.NewReader(big)); created {
		t.Error("second Put created a new object")
	}
	got, err := s.ReadAll(id2)
	snaptMust(t, err)
	if !bytes.Equal(got, big) {
		t.Error("ReadAll content differs")
	}
	f, err := s.Open(id)
	snaptMust(t, err)
	f.Close()
	st, err := os.Stat(s.Path(id))
	snaptMust(t, err)
	if st.Mode().Perm() != 0o444 {
		t.Errorf("object mode %v, want 0444", st.Mode())
	}
	if s.Path(id) != filepath.Join(s.Root(), string(id[:2]), string(id[2:])) {
		t.Errorf("layout: %s", s.Path(id))
	}
	snaptMust(t, s.Verify(id))
	snaptMust(t, s.Verify(id2))

	var ids []ObjectID
	snaptMust(t, s.Walk(func(id ObjectID) error { ids = append(ids, id); return nil }))
	slices.Sort(ids)
	want := []ObjectID{id, id2}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("Walk = %v, want %v", ids, want)
	}

	// Corruption is named.
	snaptMust(t, os.Chmod(s.Path(id), 0o644))
	snaptMust(t, os.WriteFile(s.Path(id), []byte("HELLO object store\n"), 0o644))
	var coe *CorruptObjectError
	if err := s.Verify(id); !errors.As(err, &coe) || coe.ID != id || coe.Path != s.Path(id) {
		t.Fatalf("Verify of a corrupt object: %v", err)
	}
	// A wrong-sized copy (crash before Sync) is replaced, not trusted.
	snaptMust(t, os.Truncate(s.Path(id), 2))
	if _, _, created, err := s.PutBytes(data); err != nil || !created {
		t.Fatalf("PutBytes over a truncated object: created=%v err=%v", created, err)
	}
	snaptMust(t, s.Verify(id))

	snaptMust(t, s.Delete(id))
	if s.Has(id) {
		t.Error("Has after Delete")
	}
	snaptMust(t, s.Delete(id)) // idempotent
}

func TestStoreRejectsBadIDs(t *testing.T) {
	s := snaptStore(t)
	for _, bad := range []ObjectID{"", "../../etc/passwd", ObjectID(strings.Repeat("A", 64)), ObjectID(strings.Repeat("a", 63)), ObjectID(strings.Repeat("a", 62) + "/x")} {
		if s.Path(bad) != "" || s.Has(bad) {
			t.Errorf("%q accepted by Path/Has", bad)
		}
		if _, err := s.Open(bad); err == nil {
			t.Errorf("%q accepted by Open", bad)
		}
		if err := s.Delete(bad); err == nil {
			t.Errorf("%q accepted by Delete", bad)
		}
		if err := s.CopyTo(bad, filepath.Join(t.TempDir(), "x"), 0o644); err == nil {
			t.Errorf("%q accepted by CopyTo", bad)
		}
		if _, err := ParseObjectID(string(bad)); err == nil {
			t.Errorf("%q accepted by ParseObjectID", bad)
		}
	}
}

func TestStorePutFileAndCopyTo(t *testing.T) {
	dir := t.TempDir()
	s := snaptStore(t)
	secret := filepath.Join(dir, "secret")
	snaptWrite(t, secret, "mode zero\n", 0)
	id, n, _, err := s.PutFile(secret)
	snaptMust(t, err)
	if id != snaptID([]byte("mode zero\n")) || n != 10 {
		t.Fatalf("PutFile of a mode-000 file = %s %d", id, n)
	}
	snaptMust(t, os.Symlink(secret, filepath.Join(dir, "link")))
	if _, _, _, err := s.PutFile(filepath.Join(dir, "link")); err == nil {
		t.Error("PutFile followed a symlink")
	}

	dst := filepath.Join(dir, "copy")
	snaptMust(t, s.CopyTo(id, dst, 0o4751|os.ModeSetuid))
	st, err := os.Stat(dst)
	snaptMust(t, err)
	if st.Mode() != 0o751|os.ModeSetuid {
		t.Errorf("copy mode %v", st.Mode())
	}
	snaptMust(t, os.WriteFile(dst, []byte("the World writes in place"), 0o644))
	snaptMust(t, s.Verify(id)) // the copy shares nothing with the object
	var ost, dstSt unix.Stat_t
	snaptMust(t, unix.Stat(s.Path(id), &ost))
	snaptMust(t, unix.Stat(dst, &dstSt))
	if ost.Ino == dstSt.Ino {
		t.Error("CopyTo hard-linked the object")
	}
	if err := s.CopyTo(id, dst, 0o644); err == nil {
		t.Error("CopyTo replaced an existing file")
	}
}

// snaptAge sets an object's mtime into the past.
func snaptAge(t *testing.T, p string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	snaptMust(t, os.Chtimes(p, old, old))
}

func TestStoreGC(t *testing.T) {
	s := snaptStore(t)
	put := func(content string) ObjectID {
		id, _, _, err := s.PutBytes([]byte(content))
		snaptMust(t, err)
		return id
	}
	live, oldDead, newDead := put("live"), put("old dead"), put("new dead")
	snaptAge(t, s.Path(live), time.Hour)
	snaptAge(t, s.Path(oldDead), time.Hour)
	tmpOld := filepath.Join(s.Root(), ".tmp", "put-abandoned")
	snaptWrite(t, tmpOld, "half", 0o600)
	snaptAge(t, tmpOld, time.Hour)

	removed, freed, err := s.GC(context.Background(), func(yield func(ObjectID) bool) { yield(live) })
	snaptMust(t, err)
	if removed != 1 || freed != int64(len("old dead")+len("half")) {
		t.Errorf("GC removed %d freed %d", removed, freed)
	}
	if !s.Has(live) || s.Has(oldDead) || !s.Has(newDead) {
		t.Errorf("after GC: live %v oldDead %v newDead %v", s.Has(live), s.Has(oldDead), s.Has(newDead))
	}
	if _, err := os.Lstat(tmpOld); !errors.Is(err, os.ErrNotExist) {
		t.Error("abandoned temp file kept")
	}

	// Finding an old unreferenced object again refreshes it, so GC's grace covers it.
	snaptAge(t, s.Path(newDead), time.Hour)
	put("new dead")
	if _, _, err := s.GC(context.Background(), func(yield func(ObjectID) bool) {}); err != nil || !s.Has(newDead) {
		t.Errorf("re-put object removed by GC: %v", err)
	}
}

func TestStoreGCWhileSnapshotting(t *testing.T) {
	// Snapshotters hold the shared lock from their first Put until their
	// manifest is listed; GC, with no grace at all, must never remove an
	// object a finished snapshot names.
	s := snaptStore(t)
	s.GCGrace = -1
	var mu sync.Mutex
	var manifests [][]ObjectID
	liveSet := func(yield func(ObjectID) bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range manifests {
			for _, id := range m {
				if !yield(id) {
					return
				}
			}
		}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				lock, err := s.LockShared(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				var ids []ObjectID
				for j := range 4 {
					// Shared content across writers makes Put hit existing objects.
					id, _, _, err := s.PutBytes([]byte(fmt.Sprintf("obj %d %d", (w+i)%3, j)))
					if err != nil {
						t.Error(err)
					}
					ids = append(ids, id)
				}
				mu.Lock()
				manifests = append(manifests, ids)
				if i%2 == 0 && len(manifests) > 1 {
					manifests = manifests[1:] // snapshots get deleted too
				}
				mu.Unlock()
				if err := lock.Unlock(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	stop := make(chan struct{})
	gcDone := make(chan int)
	go func() {
		runs := 0
		for {
			select {
			case <-stop:
				gcDone <- runs
				return
			default:
			}
			if _, _, err := s.GC(ctx, liveSet); err != nil {
				t.Error(err)
			}
			runs++
		}
	}()
	wg.Wait()
	close(stop)
	runs := <-gcDone
	mu.Lock()
	defer mu.Unlock()
	for _, m := range manifests {
		for _, id := range m {
			if err := s.Verify(id); err != nil {
				t.Errorf("object of a listed manifest broken (after %d GC runs): %v", runs, err)
			}
		}
	}
	if runs == 0 {
		t.Error("GC never ran concurrently")
	}
}

func TestStoreLockExcludes(t *testing.T) {
	s := snaptStore(t)
	ctx := context.Background()
	shared, err := s.LockShared(ctx)
	snaptMust(t, err)
	shared2, err := s.LockShared(ctx)
	snaptMust(t, err)
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := s.LockExclusive(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exclusive lock while shared held: %v", err)
	}
	snaptMust(t, shared.Unlock())
	snaptMust(t, shared2.Unlock())
	ex, err := s.LockExclusive(ctx)
	snaptMust(t, err)
	snaptMust(t, ex.Unlock())
}
