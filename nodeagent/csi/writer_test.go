package csi

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// readVolume reads a volume as an application does: every entry of the
// directory that is not hidden, through its symlink.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func bytesMap(m map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// TestWriteFiles: a first set, the same set again (nothing written), a
// changed set with a key gone and one added; one timestamped directory is
// left, and every key is a symlink through ..data.
func TestWriteFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	steps := []struct {
		name    string
		data    map[string]string
		changed bool
	}{
		{"first", map[string]string{"type": "postgresql", "provider": "bindery", "password": "one", "username": "u"}, true},
		{"same", map[string]string{"type": "postgresql", "provider": "bindery", "password": "one", "username": "u"}, false},
		{"rotated", map[string]string{"type": "postgresql", "provider": "bindery", "password": "two", "uri": "postgresql://x"}, true},
	}
	for _, s := range steps {
		changed, err := writeFiles(dir, bytesMap(s.data), noGroup)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if changed != s.changed {
			t.Errorf("%s: changed = %v, want %v", s.name, changed, s.changed)
		}
		if got := readVolume(t, dir); !maps.Equal(got, s.data) {
			t.Errorf("%s: the volume reads %v, want %v", s.name, got, s.data)
		}
	}
	entries, _ := os.ReadDir(dir)
	var hidden []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			hidden = append(hidden, name)
			continue
		}
		if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != filepath.Join(dataLink, name) {
			t.Errorf("%s is not a symlink to %s/%s: %q, %v", name, dataLink, name, target, err)
		}
	}
	if len(hidden) != 2 || !slices.Contains(hidden, dataLink) {
		t.Errorf("hidden entries %v, want %s and one timestamped directory", hidden, dataLink)
	}
	fi, err := os.Stat(filepath.Join(dir, "password"))
	if err != nil || fi.Mode().Perm() != fileMode {
		t.Errorf("password mode %v (%v), want %v", fi.Mode().Perm(), err, os.FileMode(fileMode))
	}
}

// TestWriteFilesAtomic: a reader that reads two keys written together
// never sees one from the old set and one from the new.
func TestWriteFilesAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	set := func(n string) map[string][]byte {
		return map[string][]byte{"username": []byte("user" + n), "password": []byte("pass" + n)}
	}
	if _, err := writeFiles(dir, set("0"), noGroup); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var mixed atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			// Resolve ..data once, as an application holding the
			// directory would; reading each key through the top-level
			// links may straddle a swap by design, as with a Secret.
			data, err := os.Readlink(filepath.Join(dir, dataLink))
			if err != nil {
				continue
			}
			u, err1 := os.ReadFile(filepath.Join(dir, data, "username"))
			p, err2 := os.ReadFile(filepath.Join(dir, data, "password"))
			if err1 != nil || err2 != nil {
				continue // removed after the swap: read again
			}
			if strings.TrimPrefix(string(u), "user") != strings.TrimPrefix(string(p), "pass") {
				mixed.Add(1)
			}
		}
	})
	for i := range 150 {
		if _, err := writeFiles(dir, set(string(rune('a'+i%26))+string(rune('a'+i/26))), noGroup); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := mixed.Load(); n > 0 {
		t.Errorf("%d reads mixed two sets", n)
	}
}

// TestCheckKeys: keys that cannot be file names of the volume are refused,
// every one named.
func TestCheckKeys(t *testing.T) {
	t.Parallel()
	bad := map[string][]byte{"": nil, ".": nil, "..": nil, "a/b": nil, "..data": nil, strings.Repeat("k", 300): nil, "ok": nil}
	err := checkKeys(bad)
	if err == nil {
		t.Fatal("bad keys accepted")
	}
	for _, want := range []string{`""`, `"."`, `"a/b"`, `"..data"`, "longer than"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("a good key is named: %v", err)
	}
	if _, err := writeFiles(t.TempDir(), bad, noGroup); err == nil {
		t.Error("writeFiles wrote bad keys")
	}
}

// TestState: the volume's binding is recorded and read back.
func TestState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if got := readState(dir); got != "" {
		t.Errorf("state of an empty volume: %q", got)
	}
	for _, b := range []string{"orders", "orders-2"} {
		if err := writeState(dir, b); err != nil {
			t.Fatal(err)
		}
		if got := readState(dir); got != b {
			t.Errorf("state %q, want %q", got, b)
		}
	}
}

// TestWriteFilesAfterACutSwap: a swap cut short after its rename (a
// crash before the keys were linked) is finished by the next write of
// the same credentials: every key is linked, the earlier set removed.
func TestWriteFilesAfterACutSwap(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeFiles(dir, bytesMap(map[string]string{"password": "one"}), noGroup); err != nil {
		t.Fatal(err)
	}
	data := bytesMap(map[string]string{"password": "two", "username": "u"})
	// What writeFiles leaves when it stops right after the rename.
	ts, err := os.MkdirTemp(dir, "..2099_01_01_00_00_00.")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(ts, k), v, fileMode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, dataLinkTmp)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, dataLinkTmp), filepath.Join(dir, dataLink)); err != nil {
		t.Fatal(err)
	}
	if _, err := writeFiles(dir, data, noGroup); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, dir); len(got) != 2 || got["password"] != "two" || got["username"] != "u" {
		t.Errorf("the volume after the write: %v", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != filepath.Base(ts) {
			t.Errorf("the earlier set %s is still there", e.Name())
		}
	}
}
