package deviceplugin

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDeviceID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		glob, match string
		relative    bool
		want        string
	}{
		{"/some/dir/foo-*", "/some/dir/foo-1", true, "foo-1"},
		{"/dev/kvm", "/dev/kvm", true, "kvm"},
		{"/dev/*/card?", "/dev/dri/card0", true, "dri_card0"},
		{"/dev/serial/by-id/*", "/dev/serial/by-id/usb-FTDI:1.0 x", true, "usb-FTDI_1.0_x"},
		{"/dev/foo-*", "/dev/foo-1", false, "dev_foo-1"},
		{"/foo*", "/foo1", true, "foo1"},
	}
	for _, tt := range tests {
		if got := deviceID(tt.glob, tt.match, tt.relative); got != tt.want {
			t.Errorf("deviceID(%q, %q, %v) = %q, want %q", tt.glob, tt.match, tt.relative, got, tt.want)
		}
	}
}

func TestWatchDirs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"a/x", "b/x", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j := func(p ...string) string { return filepath.Join(append([]string{root}, p...)...) }
	tests := []struct {
		glob string
		want []string
	}{
		{j("a", "x", "dev-*"), []string{j("a", "x")}},
		{j("*", "x", "dev"), []string{root, j("a"), j("a", "x"), j("b"), j("b", "x"), j("c")}},
		{j("*", "dev"), []string{root, j("a"), j("b"), j("c")}},
		{j("missing", "deeper", "dev-*"), []string{root}}, // wait for it to appear
	}
	for _, tt := range tests {
		if got := dedupe(watchDirs(tt.glob)); !slices.Equal(got, tt.want) {
			t.Errorf("watchDirs(%q) = %q, want %q", tt.glob, got, tt.want)
		}
	}
}

func TestNUMANodesFallsBack(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/dev/null", os.Args[0]} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Skip(err)
		}
		// Real sysfs: /dev/null is a virtual device; a regular file has none.
		if got := numaNodes("/sys", fi); got != nil {
			t.Errorf("numaNodes(%s) = %v, want none", path, got)
		}
		if got := numaNodes(filepath.Join(t.TempDir(), "no-sysfs"), fi); got != nil {
			t.Errorf("numaNodes(%s) without sysfs = %v, want none", path, got)
		}
	}
}
