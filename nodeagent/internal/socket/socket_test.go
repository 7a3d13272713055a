package socket

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shortDir returns a directory whose socket paths fit in 107 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// TestClaim: nothing there is free; a stale socket is removed; a live one
// and a file that is no socket are left alone, with errors that say so.
func TestClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := shortDir(t)

	free := filepath.Join(dir, "free.sock")
	if removed, err := Claim(ctx, free, "the test"); removed || err != nil {
		t.Errorf("nothing there: removed %v, err %v", removed, err)
	}

	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if removed, err := Claim(ctx, stale, "the test"); !removed || err != nil {
		t.Errorf("stale socket: removed %v, err %v", removed, err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket still there: %v", err)
	}

	live := filepath.Join(dir, "live.sock")
	ll, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer ll.Close()
	if removed, err := Claim(ctx, live, "the test"); removed || !errors.Is(err, ErrInUse) {
		t.Errorf("live socket: removed %v, err %v, want ErrInUse", removed, err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Claim(ctx, file, "the test"); err == nil || !strings.Contains(err.Error(), "is not a socket; remove it to let the test start") {
		t.Errorf("plain file: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("plain file removed: %v", err)
	}
}

// TestStamp: a file keeps its stamp; another file put in its place (as a
// socket served again is) gets a new one; a missing file has none.
func TestStamp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if StampOf(path).Exists() {
		t.Error("a missing file has a stamp")
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	first := StampOf(path)
	if !first.Exists() || StampOf(path) != first {
		t.Fatalf("stamp %v, then %v", first, StampOf(path))
	}
	next := filepath.Join(dir, "next")
	if err := os.WriteFile(next, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if StampOf(path) == first {
		t.Error("another file in its place has the same stamp")
	}
}
