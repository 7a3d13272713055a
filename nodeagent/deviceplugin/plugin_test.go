package deviceplugin_test

import (
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/nodeagent/deviceplugin"
	"github.com/bindery-dev/bindery/nodeagent/deviceplugin/kubelettest"
)

const (
	healthy   = pluginapi.Healthy
	unhealthy = pluginapi.Unhealthy
	// reregisterWithin is the bound on re-registration after a
	// kubelet restart or a deleted socket.
	reregisterWithin = time.Second
)

func TestRegistersAndAdvertisesMatches(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0", "foo-1", "bar"}})

	if got := b.kubelet.Registrations(resource); got != 1 {
		t.Errorf("registrations = %d, want 1", got)
	}
	opts := b.kubelet.Options(resource)
	if !opts.GetPreferredAllocationAvailable || opts.PreStartRequired {
		t.Errorf("options = %v, want preferred allocation and no pre-start", opts)
	}
	want := map[string]string{"foo-0": healthy, "foo-1": healthy}
	if got := b.kubelet.Devices(resource); !maps.Equal(got, want) {
		t.Errorf("devices = %v, want %v", got, want)
	}
	waitReady(t, b.manager)
	if got := metricValue(t, b.reg, "bindery_nodeagent_devices", map[string]string{"resource": resource, "health": healthy}); got != 2 {
		t.Errorf("healthy devices metric = %v, want 2", got)
	}
	if got := metricValue(t, b.reg, "bindery_nodeagent_registrations_total", map[string]string{"resource": resource, "result": "success"}); got != 1 {
		t.Errorf("registrations metric = %v, want 1", got)
	}
	if got := metricValue(t, b.reg, "bindery_nodeagent_registered", map[string]string{"resource": resource}); got != 1 {
		t.Errorf("registered metric = %v, want 1", got)
	}
}

func TestAllocate(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		files: []string{"foo-0", "foo-1", "foo-2"},
		configs: func(dev string) []deviceplugin.Config {
			return []deviceplugin.Config{{
				ResourceName: resource,
				Devices:      []deviceplugin.DeviceGlob{{Path: filepath.Join(dev, "foo-*"), Permissions: "r"}},
				Mounts:       []deviceplugin.Mount{{HostPath: "/opt/foo/lib", ContainerPath: "/usr/lib/foo", ReadOnly: true}},
				Env:          map[string]string{"FOO_MODE": "fast"},
				DeviceIDsEnv: "FOO_DEVICES",
				Annotations:  map[string]string{"example.com/foo": "yes"},
				CDIDevices:   []string{"example.com/foo={id}", "example.com/foo=common"},
			}}
		},
	})
	must(t, os.Remove(filepath.Join(b.devDir, "foo-2")))
	waitCtx(t, 5*time.Second, func(ctx context.Context) error {
		return b.kubelet.WaitHealth(ctx, resource, "foo-2", unhealthy)
	})

	tests := []struct {
		name string
		ids  []string
		code codes.Code
	}{
		{"one device", []string{"foo-0"}, codes.OK},
		{"two devices", []string{"foo-1", "foo-0"}, codes.OK},
		{"unknown device", []string{"foo-0", "nope"}, codes.InvalidArgument},
		{"unhealthy device", []string{"foo-2"}, codes.FailedPrecondition},
		{"no devices", nil, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := b.kubelet.Allocate(ctx, resource, tt.ids...)
			if status.Code(err) != tt.code {
				t.Fatalf("allocate %v: code %v (%v), want %v", tt.ids, status.Code(err), err, tt.code)
			}
			if err != nil {
				return
			}
			var specs, cdi []string
			for _, d := range got.Devices {
				specs = append(specs, d.HostPath+":"+d.ContainerPath+":"+d.Permissions)
			}
			for _, c := range got.CdiDevices {
				cdi = append(cdi, c.Name)
			}
			var wantSpecs, wantCDI []string
			for _, id := range tt.ids {
				p := filepath.Join(b.devDir, id)
				wantSpecs = append(wantSpecs, p+":"+p+":r")
				wantCDI = append(wantCDI, "example.com/foo="+id)
			}
			wantCDI = append(wantCDI, "example.com/foo=common")
			if !slices.Equal(specs, wantSpecs) {
				t.Errorf("device specs = %v, want %v", specs, wantSpecs)
			}
			if !slices.Equal(cdi, wantCDI) {
				t.Errorf("CDI devices = %v, want %v", cdi, wantCDI)
			}
			wantEnv := map[string]string{"FOO_MODE": "fast", "FOO_DEVICES": strings.Join(tt.ids, ",")}
			if !maps.Equal(got.Envs, wantEnv) {
				t.Errorf("env = %v, want %v", got.Envs, wantEnv)
			}
			if len(got.Mounts) != 1 || got.Mounts[0].HostPath != "/opt/foo/lib" || got.Mounts[0].ContainerPath != "/usr/lib/foo" || !got.Mounts[0].ReadOnly {
				t.Errorf("mounts = %v", got.Mounts)
			}
			if got.Annotations["example.com/foo"] != "yes" {
				t.Errorf("annotations = %v", got.Annotations)
			}
		})
	}

	// Several containers in one request: all or nothing.
	c, err := b.kubelet.Client(resource)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"foo-0"}}, {DevicesIds: []string{"foo-1"}},
	}})
	must(t, err)
	if len(resp.ContainerResponses) != 2 || resp.ContainerResponses[1].Devices[0].HostPath != filepath.Join(b.devDir, "foo-1") {
		t.Errorf("two containers: %v", resp)
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"foo-0"}}, {DevicesIds: []string{"foo-2"}},
	}}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("two containers, one unhealthy device: %v, want FailedPrecondition", err)
	}

	labels := func(result string) map[string]string {
		return map[string]string{"resource": resource, "result": result}
	}
	if got := metricValue(t, b.reg, "bindery_nodeagent_allocations_total", labels("allocated")); got != 4 {
		t.Errorf("allocated metric = %v, want 4", got)
	}
	if got := metricValue(t, b.reg, "bindery_nodeagent_allocations_total", labels("rejected")); got != 4 {
		t.Errorf("rejected metric = %v, want 4", got)
	}
}

func TestHealthFollowsFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0", "foo-1"}})
	foo1 := filepath.Join(b.devDir, "foo-1")
	expect := func(t *testing.T, want map[string]string) {
		t.Helper()
		waitCtx(t, 5*time.Second, func(ctx context.Context) error {
			err := b.kubelet.WaitFor(ctx, func() bool { return maps.Equal(b.kubelet.Devices(resource), want) })
			if err != nil {
				return errors.Join(err, errors.New("devices: "+fmtDevices(b.kubelet.Devices(resource))))
			}
			return nil
		})
	}

	must(t, os.Remove(foo1))
	expect(t, map[string]string{"foo-0": healthy, "foo-1": unhealthy})
	touch(t, foo1)
	expect(t, map[string]string{"foo-0": healthy, "foo-1": healthy})
	touch(t, filepath.Join(b.devDir, "foo-2"))
	expect(t, map[string]string{"foo-0": healthy, "foo-1": healthy, "foo-2": healthy})
	must(t, os.Chmod(foo1, 0o000)) // unreadable
	expect(t, map[string]string{"foo-0": healthy, "foo-1": unhealthy, "foo-2": healthy})
	must(t, os.Chmod(foo1, 0o644))
	expect(t, map[string]string{"foo-0": healthy, "foo-1": healthy, "foo-2": healthy})

	// The whole directory goes, then comes back.
	must(t, os.RemoveAll(b.devDir))
	expect(t, map[string]string{"foo-0": unhealthy, "foo-1": unhealthy, "foo-2": unhealthy})
	must(t, os.Mkdir(b.devDir, 0o755))
	touch(t, filepath.Join(b.devDir, "foo-0"))
	expect(t, map[string]string{"foo-0": healthy, "foo-1": unhealthy, "foo-2": unhealthy})

	// Every change reached the kubelet, in order, on one stream.
	var seq []string
	for _, h := range b.kubelet.History(resource) {
		seq = append(seq, h["foo-1"])
	}
	seq = slices.Compact(seq)
	want := []string{healthy, unhealthy, healthy, unhealthy, healthy, unhealthy}
	if !slices.Equal(seq, want) {
		t.Errorf("foo-1 health over the stream = %v, want %v", seq, want)
	}
}

func TestKubeletRestartReregisters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0"}})
	for i := 2; i <= 4; i++ {
		must(t, b.kubelet.Restart())
		// The restart deleted the plugin's socket and created kubelet.sock.
		waitCtx(t, reregisterWithin, func(ctx context.Context) error {
			return b.kubelet.WaitRegistered(ctx, resource, i)
		})
		if got := b.kubelet.Devices(resource); got["foo-0"] != healthy {
			t.Fatalf("restart %d: devices = %v", i, got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := b.kubelet.Allocate(ctx, resource, "foo-0")
		cancel()
		must(t, err)
		if _, err := os.Stat(b.socket); err != nil {
			t.Fatalf("restart %d: plugin socket: %v", i, err)
		}
	}
}

func TestRecreatedKubeletSocketReregisters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0"}})
	for i := 2; i <= 3; i++ {
		must(t, b.kubelet.Reopen()) // the plugin's socket stays
		waitCtx(t, reregisterWithin, func(ctx context.Context) error {
			return b.kubelet.WaitRegistered(ctx, resource, i)
		})
	}
}

func TestDeletedSocketReregisters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0"}})
	must(t, os.Remove(b.socket))
	waitCtx(t, reregisterWithin, func(ctx context.Context) error {
		return b.kubelet.WaitRegistered(ctx, resource, 2)
	})
	if _, err := os.Stat(b.socket); err != nil {
		t.Fatalf("plugin socket: %v", err)
	}
}

func TestKubeletStartsAfterPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0"}, noKubelet: true})
	// The plugin serves its socket before any kubelet exists.
	waitFile(t, b.socket)
	if err := b.manager.Ready(context.Background()); err == nil {
		t.Error("ready without a kubelet")
	}
	k, err := kubelettest.Start(b.pluginDir)
	must(t, err)
	t.Cleanup(k.Stop)
	waitCtx(t, reregisterWithin, func(ctx context.Context) error { return k.WaitRegistered(ctx, resource, 1) })
	waitReady(t, b.manager)
}

func TestStaleSocketIsRemoved(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	pluginDir := filepath.Join(root, "dp")
	must(t, os.MkdirAll(pluginDir, 0o750))
	socket := filepath.Join(pluginDir, "bindery-example.com_foo.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	must(t, err)
	l.SetUnlinkOnClose(false)
	must(t, l.Close()) // a socket nobody listens on, as a killed agent leaves it

	// No kubelet: one starting would clean the directory itself.
	m, err := deviceplugin.NewManager([]deviceplugin.Config{{ResourceName: resource, Slots: 1}}, deviceplugin.Options{Dir: pluginDir, Logger: testLogger(t)})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The stale file is replaced by a live socket.
	waitCtx(t, 5*time.Second, func(ctx context.Context) error {
		for {
			if c, err := net.Dial("unix", socket); err == nil {
				return c.Close()
			}
			select {
			case <-ctx.Done():
				return errors.New("plugin socket never answered")
			case <-time.After(5 * time.Millisecond): // polling a socket; not an assertion
			}
		}
	})
}

func TestSocketServedByAnotherProcessIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0"}})
	// A second agent for the same resource on the same directory.
	m, err := deviceplugin.NewManager(fooConfig(b.devDir), deviceplugin.Options{Dir: b.pluginDir, Logger: testLogger(t)})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = m.Run(ctx)
	if !errors.Is(err, deviceplugin.ErrSocketInUse) {
		t.Fatalf("second run: %v, want ErrSocketInUse", err)
	}
	// The first is untouched.
	if _, err := os.Stat(b.socket); err != nil {
		t.Fatalf("first plugin's socket: %v", err)
	}
	if got := b.kubelet.Registrations(resource); got != 1 {
		t.Errorf("registrations = %d, want 1", got)
	}
}

func TestStopRemovesSocket(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{files: []string{"foo-0"}})
	b.stop()
	select {
	case err := <-b.done:
		b.done <- err // for the cleanup
		must(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return")
	}
	if _, err := os.Stat(b.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after stop: %v", err)
	}
}

func TestSlots(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		files: []string{"fuse"},
		configs: func(dev string) []deviceplugin.Config {
			return []deviceplugin.Config{{
				ResourceName: resource,
				Devices:      []deviceplugin.DeviceGlob{{Path: filepath.Join(dev, "fuse"), ContainerPath: "/dev/fuse", Permissions: "rwm"}},
				Slots:        3,
			}}
		},
	})
	want := map[string]string{"foo-0": healthy, "foo-1": healthy, "foo-2": healthy}
	if got := b.kubelet.Devices(resource); !maps.Equal(got, want) {
		t.Fatalf("devices = %v, want %v", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := b.kubelet.Allocate(ctx, resource, "foo-0", "foo-2")
	must(t, err)
	wantSpec := &pluginapi.DeviceSpec{HostPath: filepath.Join(b.devDir, "fuse"), ContainerPath: "/dev/fuse", Permissions: "rwm"}
	if len(got.Devices) != 1 || !reflect.DeepEqual(got.Devices[0].String(), wantSpec.String()) {
		t.Errorf("devices = %v, want [%v]", got.Devices, wantSpec)
	}
	// Every slot needs the node.
	must(t, os.Remove(filepath.Join(b.devDir, "fuse")))
	waitCtx(t, 5*time.Second, func(ctx context.Context) error {
		return b.kubelet.WaitFor(ctx, func() bool {
			d := b.kubelet.Devices(resource)
			return d["foo-0"] == unhealthy && d["foo-1"] == unhealthy && d["foo-2"] == unhealthy
		})
	})
}

func TestPreStartContainer(t *testing.T) {
	t.Parallel()
	out := filepath.Join(tempDir(t), "out")
	b := setup(t, setupOpts{
		files: []string{"foo-0", "foo-1"},
		configs: func(dev string) []deviceplugin.Config {
			return []deviceplugin.Config{
				{
					ResourceName: resource,
					Devices:      []deviceplugin.DeviceGlob{{Path: filepath.Join(dev, "foo-*")}},
					PreStartContainer: &deviceplugin.PreStart{
						Command: []string{"/bin/sh", "-c", `echo "$BINDERY_RESOURCE_NAME $BINDERY_DEVICE_IDS $*" > ` + out, "sh"},
					},
				},
				{
					ResourceName:      "example.com/bar",
					Devices:           []deviceplugin.DeviceGlob{{Path: filepath.Join(dev, "foo-0")}},
					PreStartContainer: &deviceplugin.PreStart{Command: []string{"/bin/sh", "-c", "echo broken >&2; exit 3"}, TimeoutSeconds: 5},
				},
			}
		},
	})
	if !b.kubelet.Options(resource).PreStartRequired {
		t.Fatal("pre-start not required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, b.kubelet.PreStartContainer(ctx, resource, "foo-1", "foo-0"))
	got, err := os.ReadFile(out)
	must(t, err)
	want := resource + " foo-1,foo-0 " + filepath.Join(b.devDir, "foo-1") + " " + filepath.Join(b.devDir, "foo-0") + "\n"
	if string(got) != want {
		t.Errorf("pre-start saw %q, want %q", got, want)
	}
	err = b.kubelet.PreStartContainer(ctx, "example.com/bar", "foo-0")
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "broken") {
		t.Errorf("failing pre-start: %v", err)
	}
	if err := b.kubelet.PreStartContainer(ctx, resource, "nope"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("pre-start of unknown device: %v", err)
	}
}

func TestNUMALocalityFromSysfs(t *testing.T) {
	t.Parallel()
	// Symlinks to real character devices, and a sysfs tree that places
	// them on two NUMA nodes (/dev/null 1:3, /dev/zero 1:5 on node 0;
	// /dev/full 1:7, /dev/urandom 1:9 on node 1); /dev/random (1:8) has no
	// numa_node anywhere above it.
	sysfs := tempDir(t)
	fakeSysfs(t, sysfs, map[string]string{"1:3": "0", "1:5": "0", "1:7": "1", "1:9": "1", "1:8": ""})
	b := setup(t, setupOpts{
		sysfs: sysfs,
		configs: func(dev string) []deviceplugin.Config {
			for id, target := range map[string]string{"foo-a": "/dev/null", "foo-b": "/dev/zero", "foo-c": "/dev/full", "foo-d": "/dev/urandom", "foo-e": "/dev/random"} {
				must(t, os.Symlink(target, filepath.Join(dev, id)))
			}
			return fooConfig(dev)
		},
	})
	for id, want := range map[string][]int64{"foo-a": {0}, "foo-b": {0}, "foo-c": {1}, "foo-d": {1}, "foo-e": nil} {
		if got := b.kubelet.Topology(resource, id); !slices.Equal(got, want) {
			t.Errorf("topology of %s = %v, want %v", id, got, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all := []string{"foo-a", "foo-b", "foo-c", "foo-d", "foo-e"}
	tests := []struct {
		available, must []string
		size            int
		want            []string
	}{
		{all, nil, 2, []string{"foo-a", "foo-b"}},
		{all, []string{"foo-d"}, 2, []string{"foo-d", "foo-c"}},
		{all, []string{"foo-d"}, 3, []string{"foo-d", "foo-c", "foo-e"}},
		{[]string{"foo-a", "foo-c", "foo-d"}, nil, 2, []string{"foo-c", "foo-d"}},
		{all, []string{"foo-a", "foo-c"}, 2, []string{"foo-a", "foo-c"}},
	}
	for _, tt := range tests {
		got, err := b.kubelet.GetPreferredAllocation(ctx, resource, tt.available, tt.must, tt.size)
		must(t, err)
		if !slices.Equal(got, tt.want) {
			t.Errorf("preferred(%v, must %v, %d) = %v, want %v", tt.available, tt.must, tt.size, got, tt.want)
		}
	}
	// The runtime gets the real node behind the symlink.
	got, err := b.kubelet.Allocate(ctx, resource, "foo-a")
	must(t, err)
	if d := got.Devices[0]; d.HostPath != "/dev/null" || d.ContainerPath != filepath.Join(b.devDir, "foo-a") {
		t.Errorf("spec = %v", d)
	}
}

func TestHostRoot(t *testing.T) {
	t.Parallel()
	// The agent in a container sees the node's /dev under a host root;
	// what it tells the kubelet are the node's paths.
	b := setup(t, setupOpts{
		hostRoot: true,
		configs: func(dev string) []deviceplugin.Config {
			must(t, os.MkdirAll(filepath.Join(dev, "serial", "by-id"), 0o755))
			must(t, os.MkdirAll(filepath.Join(dev, "usb"), 0o755))
			touch(t, filepath.Join(dev, "usb", "ttyUSB0"))
			must(t, os.Symlink("/dev/usb/ttyUSB0", filepath.Join(dev, "serial", "by-id", "usb-x"))) // absolute: the node's
			return []deviceplugin.Config{{ResourceName: resource, Devices: []deviceplugin.DeviceGlob{{Path: "/dev/serial/by-id/*"}}}}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := b.kubelet.Allocate(ctx, resource, "usb-x")
	must(t, err)
	if d := got.Devices[0]; d.HostPath != "/dev/usb/ttyUSB0" || d.ContainerPath != "/dev/serial/by-id/usb-x" {
		t.Errorf("spec = %v", d)
	}
	// The node behind the link goes; the link stays.
	must(t, os.Remove(filepath.Join(b.devDir, "usb", "ttyUSB0")))
	must(t, b.kubelet.WaitHealth(ctx, resource, "usb-x", unhealthy))
	touch(t, filepath.Join(b.devDir, "usb", "ttyUSB0"))
	must(t, b.kubelet.WaitHealth(ctx, resource, "usb-x", healthy))
}

// fakeSysfs builds <root>/dev/char/MAJ:MIN symlinks into a devices tree,
// with numa_node in the PCI function above each device (none when "").
func fakeSysfs(t testing.TB, root string, nodes map[string]string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(root, "dev", "char"), 0o755))
	i := 0
	for devno, node := range nodes {
		i++
		fn := filepath.Join(root, "devices", "pci0000:00", "0000:00:0"+string(rune('0'+i))+".0")
		dev := filepath.Join(fn, "misc", "dev"+string(rune('0'+i)))
		must(t, os.MkdirAll(dev, 0o755))
		if node != "" {
			must(t, os.WriteFile(filepath.Join(fn, "numa_node"), []byte(node+"\n"), 0o644))
		}
		rel, err := filepath.Rel(filepath.Join(root, "dev", "char"), dev)
		must(t, err)
		must(t, os.Symlink(rel, filepath.Join(root, "dev", "char", devno)))
	}
}

// waitReady polls the readiness check, as a kubelet's probe would.
func waitReady(t testing.TB, m *deviceplugin.Manager) {
	t.Helper()
	eventually.Succeeds(t, 5*time.Second, m.Ready)
}

func waitFile(t testing.TB, path string) {
	t.Helper()
	eventually.Succeeds(t, 5*time.Second, func(context.Context) error {
		_, err := os.Stat(path)
		return err
	})
}

func fmtDevices(m map[string]string) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s = append(s, k+"="+m[k])
	}
	return strings.Join(s, " ")
}

// A configured path that matches a plain file is no device: the runtime
// refuses it ("not a device node") and the Pod that got it never starts.
// Only device nodes are advertised as devices; plain files only when the
// glob asks for them as mounts.
func TestPlainFilesAreNotDevices(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{
		files: []string{"foo-0"},
		configs: func(dev string) []deviceplugin.Config {
			must(t, os.WriteFile(filepath.Join(dev, "foo-file"), []byte("not a device\n"), 0o644))
			must(t, os.MkdirAll(filepath.Join(dev, "conf"), 0o755))
			must(t, os.WriteFile(filepath.Join(dev, "conf", "a.json"), []byte("{}\n"), 0o644))
			return []deviceplugin.Config{
				{ResourceName: resource, Devices: []deviceplugin.DeviceGlob{{Path: filepath.Join(dev, "foo-*")}}},
				{ResourceName: "example.com/conf", Devices: []deviceplugin.DeviceGlob{
					{Path: filepath.Join(dev, "conf", "*.json"), Mount: true, Permissions: "r"},
				}},
			}
		},
	})

	if got, want := b.kubelet.Devices(resource), map[string]string{"foo-0": healthy}; !maps.Equal(got, want) {
		t.Errorf("devices = %v, want %v (the plain file left out)", got, want)
	}
	// A plain file that appears later is left out too.
	must(t, os.WriteFile(filepath.Join(b.devDir, "foo-late"), nil, 0o644))
	touch(t, filepath.Join(b.devDir, "foo-1"))
	waitCtx(t, 5*time.Second, func(ctx context.Context) error {
		return b.kubelet.WaitHealth(ctx, resource, "foo-1", healthy)
	})
	if got, want := b.kubelet.Devices(resource), map[string]string{"foo-0": healthy, "foo-1": healthy}; !maps.Equal(got, want) {
		t.Errorf("devices = %v, want %v", got, want)
	}

	if got, want := b.kubelet.Devices("example.com/conf"), map[string]string{"a.json": healthy}; !maps.Equal(got, want) {
		t.Errorf("mount devices = %v, want %v", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := b.kubelet.Allocate(ctx, "example.com/conf", "a.json")
	must(t, err)
	conf := filepath.Join(b.devDir, "conf", "a.json")
	if len(got.Devices) != 0 {
		t.Errorf("allocate a.json: devices %v, want none (a plain file is mounted)", got.Devices)
	}
	if len(got.Mounts) != 1 || got.Mounts[0].HostPath != conf || got.Mounts[0].ContainerPath != conf || !got.Mounts[0].ReadOnly {
		t.Errorf("allocate a.json: mounts %v, want %s read-only at the same path", got.Mounts, conf)
	}
}
