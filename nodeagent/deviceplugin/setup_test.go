package deviceplugin_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/bindery-dev/bindery/nodeagent/deviceplugin"
	"github.com/bindery-dev/bindery/nodeagent/deviceplugin/kubelettest"
)

const resource = "example.com/foo"

// bundle is what a device plugin test works with: a device directory with
// real files, a kubelet on its own device-plugin directory, and a running
// manager.
type bundle struct {
	devDir    string
	pluginDir string
	socket    string
	kubelet   *kubelettest.Kubelet
	manager   *deviceplugin.Manager
	reg       *prometheus.Registry
	done      chan error // Run's result
	stop      context.CancelFunc
}

type setupOpts struct {
	configs   func(devDir string) []deviceplugin.Config
	files     []string // created in devDir before the manager starts
	noKubelet bool     // start the manager first
	sysfs     string
	hostRoot  bool // the test's root directory is the node's root: devDir is /dev
}

// tempDir returns a short directory (socket paths must fit in 107 bytes,
// which t.TempDir's test-named paths may not) removed after the test.
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

func fooConfig(devDir string) []deviceplugin.Config {
	return []deviceplugin.Config{{
		ResourceName: resource,
		Devices:      []deviceplugin.DeviceGlob{{Path: filepath.Join(devDir, "foo-*")}},
	}}
}

// setup starts everything and waits for the first registration.
func setup(t testing.TB, o setupOpts) *bundle {
	t.Helper()
	root := tempDir(t)
	b := &bundle{
		devDir:    filepath.Join(root, "dev"),
		pluginDir: filepath.Join(root, "dp"),
		reg:       prometheus.NewRegistry(),
		done:      make(chan error, 1),
	}
	b.socket = filepath.Join(b.pluginDir, "bindery-example.com_foo.sock")
	must(t, os.MkdirAll(b.devDir, 0o755))
	for _, f := range o.files {
		touch(t, filepath.Join(b.devDir, f))
	}
	if o.configs == nil {
		o.configs = fooConfig
	}
	if !o.noKubelet {
		k, err := kubelettest.Start(b.pluginDir)
		must(t, err)
		b.kubelet = k
		t.Cleanup(k.Stop)
	}
	var log *slog.Logger // benchmarks measure, not log
	if _, bench := t.(*testing.B); !bench {
		log = testLogger(t)
	}
	var hostRoot string
	if o.hostRoot {
		hostRoot = root
	}
	cfgs := o.configs(b.devDir)
	m, err := deviceplugin.NewManager(cfgs, deviceplugin.Options{
		Dir:        b.pluginDir,
		HostRoot:   hostRoot,
		SysfsRoot:  o.sysfs,
		Logger:     log,
		Registerer: b.reg,
	})
	must(t, err)
	b.manager = m
	ctx, cancel := context.WithCancel(context.Background())
	b.stop = cancel
	go func() { b.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-b.done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
			b.done <- err
		case <-time.After(10 * time.Second):
			t.Error("manager did not stop within 10 s")
		}
	})
	if b.kubelet != nil {
		for _, c := range cfgs {
			waitCtx(t, 5*time.Second, func(ctx context.Context) error { return b.kubelet.WaitRegistered(ctx, c.ResourceName, 1) })
		}
	}
	return b
}

// waitCtx runs f with a deadline and fails the test on error.
func waitCtx(t testing.TB, d time.Duration, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := f(ctx); err != nil {
		t.Fatal(err)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// touch creates a character device node at path, with the numbers of
// /dev/null, as a stand-in for a real device: the plugin advertises device
// nodes only.
func touch(t testing.TB, path string) {
	t.Helper()
	must(t, unix.Mknod(path, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))))
}

// testLogger logs to the test at debug level; only shown on failure or -v.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// metricValue returns the value of the series name with the given labels.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			return value(m)
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return 0
}
