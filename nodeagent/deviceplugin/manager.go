package deviceplugin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation/field"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// DefaultDir is the kubelet's device-plugin directory, which holds
// kubelet.sock and the plugins' sockets.
const DefaultDir = pluginapi.DevicePluginPath

// maxSocketPath is the longest path a unix socket address holds on Linux.
const maxSocketPath = 107

// Options configure a Manager.
type Options struct {
	// Dir is the device-plugin directory; DefaultDir when empty.
	Dir string
	// HostRoot is where the node's root file system is mounted when the
	// agent runs in a container that does not see the node's /dev at
	// /dev; device paths in the configuration are looked up under it.
	// Empty means the agent sees the node's paths as they are.
	HostRoot string
	// SysfsRoot is where sysfs is mounted, for NUMA locality; "/sys" when
	// empty.
	SysfsRoot string
	// Logger receives the plugins' logs; nothing is logged when nil.
	Logger *slog.Logger
	// Registerer receives the plugins' metrics; none are exported when nil.
	Registerer prometheus.Registerer
}

// Manager runs one device plugin per configured resource and keeps each
// registered with the kubelet across kubelet restarts.
type Manager struct {
	dir     string
	kubelet string
	log     *slog.Logger
	plugins []*plugin
}

// NewManager checks the configuration and finds each plugin's devices; Run
// serves them.
func NewManager(cfgs []Config, opts Options) (*Manager, error) {
	if errs := Validate(cfgs, field.NewPath("devicePlugins")); len(errs) > 0 {
		return nil, fmt.Errorf("device plugin configuration: %w", errs.ToAggregate())
	}
	dir, err := filepath.Abs(cmp.Or(opts.Dir, DefaultDir))
	if err != nil {
		return nil, fmt.Errorf("device plugin directory: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		dir:     dir,
		kubelet: filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket)),
		log:     log,
	}
	sysfs := cmp.Or(opts.SysfsRoot, "/sys")
	var root string
	if opts.HostRoot != "" && opts.HostRoot != "/" {
		if root, err = filepath.Abs(opts.HostRoot); err != nil {
			return nil, fmt.Errorf("host root: %w", err)
		}
	}
	var errs []error
	for _, c := range cfgs {
		p := newPlugin(c, dir, root, sysfs, log, met)
		if len(p.socket) > maxSocketPath {
			errs = append(errs, fmt.Errorf("socket %s for %s is longer than the %d bytes a unix socket address holds", p.socket, c.ResourceName, maxSocketPath))
		}
		m.plugins = append(m.plugins, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Run serves every plugin until ctx ends, then removes their sockets. It
// fails at once when a plugin's socket is served by another process
// (ErrSocketInUse) and removes stale sockets left by an earlier run.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return fmt.Errorf("create device plugin directory: %w", err)
	}
	// Claim every socket before serving any, so that a second agent stops
	// without disturbing the first.
	for _, p := range m.plugins {
		if err := claimSocket(ctx, p.socket, p.log); err != nil {
			return fmt.Errorf("start device plugin %s: %w", p.resource, err)
		}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch device plugin directory: %w", err)
	}
	defer w.Close()
	if err := w.Add(m.dir); err != nil {
		return fmt.Errorf("watch device plugin directory %s: %w", m.dir, err)
	}
	m.log.Info("serving device plugins", "dir", m.dir, "plugins", len(m.plugins))

	g, ctx := errgroup.WithContext(ctx)
	for _, p := range m.plugins {
		g.Go(func() error {
			if err := p.run(ctx); err != nil {
				return fmt.Errorf("device plugin %s: %w", p.resource, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		m.route(ctx, w)
		return nil
	})
	return g.Wait()
}

// route turns events in the device-plugin directory into signals for the
// plugins: the kubelet creates kubelet.sock when it starts, and removes
// every socket in the directory when it starts or a plugin is dropped.
func (m *Manager) route(ctx context.Context, w *fsnotify.Watcher) {
	tick := time.NewTicker(checkInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			for _, p := range m.plugins {
				switch {
				case ev.Name == m.kubelet && ev.Has(fsnotify.Create):
					signal(p.kubeletEvent)
				case ev.Name == p.socket && ev.Has(fsnotify.Remove|fsnotify.Rename):
					signal(p.socketEvent)
				}
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// Events may be lost (a queue overflow): have every plugin
			// look at its socket and kubelet.sock again.
			m.log.Warn("watch device plugin directory", "err", err)
			for _, p := range m.plugins {
				signal(p.socketEvent)
			}
		case <-tick.C:
			// The directory itself was removed and created again: the
			// watch went with it.
			if len(w.WatchList()) == 0 && w.Add(m.dir) == nil {
				for _, p := range m.plugins {
					signal(p.socketEvent)
				}
			}
		}
	}
}

// Ready reports whether every plugin is registered with the kubelet; it
// is the node agent's readiness check.
func (m *Manager) Ready(context.Context) error {
	var errs []error
	for _, p := range m.plugins {
		if !p.registered.Load() {
			errs = append(errs, fmt.Errorf("device plugin %s is not registered with the kubelet", p.resource))
		}
	}
	return errors.Join(errs...)
}
