package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bindery-dev/bindery/nodeagent/deviceplugin/kubelettest"
)

// TestServeNodeagent runs `bindery serve nodeagent --config FILE
// --device-plugin-dir DIR` against a kubelet that follows the device
// manager's protocol: the resource registers with the devices the glob
// matches, a removed device turns Unhealthy, and a kubelet restart is
// followed by a new registration.
func TestServeNodeagent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := t.TempDir()
	pluginDir, devDir := filepath.Join(root, "plugins"), filepath.Join(root, "dev")
	for _, d := range []string{pluginDir, devDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Character devices with /dev/null's numbers: the agent advertises
	// device nodes only.
	for _, f := range []string{"foo-1", "foo-2"} {
		if err := unix.Mknod(filepath.Join(devDir, f), unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
	config := filepath.Join(root, "config.yaml")
	if err := os.WriteFile(config, []byte("devicePlugins:\n  - resourceName: example.com/foo\n    devices:\n      - path: "+devDir+"/foo-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubelet, err := kubelettest.Start(pluginDir)
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Stop()

	p := start(t, nil, "serve", "nodeagent", "--config", config, "--device-plugin-dir", pluginDir, "--listen", "127.0.0.1:0")
	if err := kubelet.WaitRegistered(ctx, "example.com/foo", 1); err != nil {
		t.Fatalf("no registration: %v\n%s", err, p.stderr.String())
	}
	if devs := kubelet.Devices("example.com/foo"); len(devs) != 2 {
		t.Fatalf("devices %v", devs)
	}
	var id string
	for d := range kubelet.Devices("example.com/foo") {
		if filepath.Base(d) == "foo-1" || d == "foo-1" {
			id = d
		}
	}
	if id == "" {
		t.Fatalf("no device for foo-1 in %v", kubelet.Devices("example.com/foo"))
	}
	if err := os.Remove(filepath.Join(devDir, "foo-1")); err != nil {
		t.Fatal(err)
	}
	if err := kubelet.WaitHealth(ctx, "example.com/foo", id, "Unhealthy"); err != nil {
		t.Fatalf("removed device not Unhealthy: %v", err)
	}
	if err := kubelet.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := kubelet.WaitRegistered(ctx, "example.com/foo", 2); err != nil {
		t.Fatalf("no registration after the kubelet restarted: %v", err)
	}
	// The kubelet's ListAndWatch streams are open: the agent closes them
	// and exits within the grace period.
	t.Logf("serve nodeagent exited %s after SIGTERM", p.terminate(t).Round(time.Millisecond))
}
