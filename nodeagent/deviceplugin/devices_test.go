package deviceplugin

import (
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
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

// TestInventoryForgetsLostDevices: a device that disappears is reported
// Unhealthy, so that the kubelet stops giving it out, and is forgotten
// once it has been gone for forgetLostAfter: a node whose devices come
// and go under new names (hot-plugged USB serial adapters, say) does not
// advertise every device it ever had. They were remembered for ever.
func TestInventoryForgetsLostDevices(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"foo-0", "foo-1"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	inv := newInventory(&Config{Devices: []DeviceGlob{{Path: filepath.Join(dir, "foo-*"), Mount: true}}}, "", "", slog.New(slog.DiscardHandler))
	now := time.Unix(1_000_000, 0)
	inv.now = func() time.Time { return now }
	state := func() map[string]bool {
		s, _ := inv.scan()
		got := map[string]bool{}
		for id, e := range s.byID {
			got[id] = e.healthy
		}
		return got
	}
	if got := state(); !maps.Equal(got, map[string]bool{"foo-0": true, "foo-1": true}) {
		t.Fatalf("first scan: %v", got)
	}
	if err := os.Remove(filepath.Join(dir, "foo-1")); err != nil {
		t.Fatal(err)
	}
	if got := state(); !maps.Equal(got, map[string]bool{"foo-0": true, "foo-1": false}) {
		t.Errorf("a device just gone: %v, want it unhealthy", got)
	}
	now = now.Add(forgetLostAfter - time.Second)
	if got := state(); !maps.Equal(got, map[string]bool{"foo-0": true, "foo-1": false}) {
		t.Errorf("a device gone for less than %v: %v, want it unhealthy", forgetLostAfter, got)
	}
	now = now.Add(2 * time.Second)
	if got := state(); !maps.Equal(got, map[string]bool{"foo-0": true}) {
		t.Errorf("a device gone for longer than %v: %v, want it forgotten", forgetLostAfter, got)
	}
	// One that comes back is a device again, and its clock starts anew.
	if err := os.WriteFile(filepath.Join(dir, "foo-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := state(); !maps.Equal(got, map[string]bool{"foo-0": true, "foo-1": true}) {
		t.Errorf("a device back: %v", got)
	}
	if len(inv.order) != 2 || len(inv.known) != 2 {
		t.Errorf("the inventory holds %d and %d nodes, want 2", len(inv.order), len(inv.known))
	}
}
