package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/wait"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/bindery-dev/bindery/nodeagent/internal/socket"
)

// ErrSocketInUse is returned when a plugin's socket already answers
// connections: another process (a second node agent) serves the resource.
var ErrSocketInUse = socket.ErrInUse

// errSocketLost says the new socket was deleted before it was checked.
var errSocketLost = errors.New("socket deleted while starting")

const (
	// checkInterval is how often a plugin checks its socket and kubelet.sock
	// without being told, in case a file-system event was lost.
	checkInterval = time.Second
	// resyncInterval is how often device paths are scanned without an event.
	resyncInterval = 30 * time.Second
	// registerTimeout leaves room for the kubelet's own dial back to the
	// plugin during Register, which it bounds at 10 s.
	registerTimeout = 15 * time.Second
	// readyTimeout bounds the check that a new server answers.
	readyTimeout = 5 * time.Second
)

// registerRetry spaces out attempts to serve the socket and register after
// a failure. It starts short because the commonest failure is brief (a
// kubelet.sock bound but not yet listening as the kubelet starts), doubles
// up to 800 ms and adds up to a quarter of jitter, so that a kubelet that
// is away is tried at least once a second and found within a second of its
// return even without an event, and the plugins of several resources do
// not knock in step.
var registerRetry = wait.Backoff{Duration: time.Millisecond, Factor: 2, Jitter: 0.25, Steps: math.MaxInt32, Cap: 800 * time.Millisecond}

// plugin serves one resource to the kubelet: a gRPC DevicePlugin server on
// its own socket, registered on kubelet.sock, re-served and re-registered
// whenever the kubelet restarts.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg      Config
	resource string
	dir      string
	socket   string // absolute path of the plugin's socket
	endpoint string // its file name, as registered
	kubelet  string // absolute path of kubelet.sock
	log      *slog.Logger

	options   *pluginapi.DevicePluginOptions
	mounts    []*pluginapi.Mount
	inv       *inventory
	state     *deviceState
	metrics   *metrics
	allocated prometheus.Counter
	rejected  prometheus.Counter

	registered atomic.Bool

	// Signals from the manager's watch of the device-plugin directory;
	// each holds at most one pending signal.
	socketEvent  chan struct{} // the plugin's socket was removed or renamed
	kubeletEvent chan struct{} // kubelet.sock was created
}

func newPlugin(cfg Config, dir, hostRoot, sysfs string, log *slog.Logger, m *metrics) *plugin {
	endpoint := "bindery-" + sanitizeID(cfg.ResourceName) + ".sock"
	p := &plugin{
		cfg:          cfg,
		resource:     cfg.ResourceName,
		dir:          dir,
		socket:       filepath.Join(dir, endpoint),
		endpoint:     endpoint,
		kubelet:      filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket)),
		log:          log.With("resource", cfg.ResourceName),
		metrics:      m,
		allocated:    m.allocations.WithLabelValues(cfg.ResourceName, "allocated"),
		rejected:     m.allocations.WithLabelValues(cfg.ResourceName, "rejected"),
		socketEvent:  make(chan struct{}, 1),
		kubeletEvent: make(chan struct{}, 1),
		options: &pluginapi.DevicePluginOptions{
			PreStartRequired:                cfg.PreStartContainer != nil,
			GetPreferredAllocationAvailable: true,
		},
	}
	for _, mt := range cfg.Mounts {
		p.mounts = append(p.mounts, &pluginapi.Mount{HostPath: mt.HostPath, ContainerPath: mt.ContainerPath, ReadOnly: mt.ReadOnly})
	}
	p.inv = newInventory(&p.cfg, hostRoot, sysfs, p.log)
	snap, _ := p.inv.scan()
	p.logInventory(snap)
	p.state = newDeviceState(snap)
	m.observeDevices(p.resource, snap)
	m.registered.WithLabelValues(p.resource).Set(0)
	return p
}

// logInventory says at start-up what the plugin advertises and how each
// is handed to a container: device nodes as devices, plain files as
// mounts. What a glob matched but cannot give is logged by the scan.
func (p *plugin) logInventory(snap *snapshot) {
	var devices, mounts []string
	for i, d := range snap.list {
		if p.cfg.Slots > 0 && i > 0 {
			break // every slot hands out the same nodes
		}
		e := snap.byID[d.ID]
		for _, s := range e.specs {
			devices = append(devices, d.ID+"="+s.HostPath)
		}
		for _, m := range e.mounts {
			mounts = append(mounts, d.ID+"="+m.HostPath)
		}
	}
	p.log.Info("advertising devices", "devices", devices, "mounts", mounts, "slots", p.cfg.Slots)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run serves the plugin and keeps it registered until ctx ends. It returns
// an error only when the plugin cannot start; later trouble (the kubelet
// away, the socket deleted) is retried.
//
// Registration runs beside the loop rather than in it: while the kubelet
// answers Register it dials the plugin back, and if the socket was deleted
// meanwhile (the kubelet cleaning its directory as it starts) that dial
// waits for a socket only this loop can serve again.
func (p *plugin) run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(p.cfg.Devices) > 0 {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("watch devices of %s: %w", p.resource, err)
		}
		wg.Go(func() { p.watchDevices(ctx, w) })
	}
	l := &loop{p: p, wg: &wg, backoff: registerRetry}
	defer l.stop()
	tick := time.NewTicker(checkInterval)
	defer tick.Stop()
	for {
		if done, err := l.keepServing(ctx); done {
			return err
		}
		l.keepRegistered(ctx)
		if !l.await(ctx, tick.C) {
			return nil
		}
	}
}

// loop is run's state from one round to the next: the server of the
// plugin's socket, the Register call in flight, and the retry after a
// failure.
type loop struct {
	p  *plugin
	wg *sync.WaitGroup

	srv       *server
	started   bool          // a server ran once: later failures are retried
	reg       *registration // in flight
	kubeletAt socket.Stamp  // the kubelet.sock registered with
	retry     <-chan time.Time
	backoff   wait.Backoff
	failing   bool
}

// stop ends the server and the call in flight as run returns.
func (l *loop) stop() {
	if l.reg != nil {
		l.reg.cancel()
	}
	if l.srv != nil {
		l.srv.stop()
	}
	l.p.setRegistered(false)
}

// fail logs a failure (once at warning level while failures last) and
// schedules the next attempt.
func (l *loop) fail(ctx context.Context, what string, err error) {
	level := slog.LevelWarn
	if l.failing {
		level = slog.LevelDebug // the kubelet may be away for long; say it once
	}
	l.failing = true
	l.p.log.Log(ctx, level, what, "err", err)
	l.retry = time.After(l.backoff.Step())
}

// keepServing serves the plugin's socket again when it is gone, unless a
// retry is pending. done says run ends, with err as its result: ctx ended,
// or the very first server could not start.
func (l *loop) keepServing(ctx context.Context) (done bool, err error) {
	p := l.p
	if l.srv != nil && !l.srv.owns() {
		p.log.Info("plugin socket is gone; serving it again", "socket", p.socket)
		l.srv.stop()
		l.srv = nil
	}
	if l.srv == nil {
		p.setRegistered(false)
		if l.reg != nil {
			l.reg.cancel()
			l.reg = nil
		}
	}
	if l.srv != nil || l.retry != nil {
		return false, nil
	}
	s, err := p.serve(ctx)
	switch {
	case err == nil:
		l.srv, l.started = s, true
	case ctx.Err() != nil:
		return true, nil
	case !l.started && !errors.Is(err, errSocketLost):
		return true, err
	default:
		l.fail(ctx, "serve device plugin", err)
	}
	return false, nil
}

// keepRegistered forgets a registration with a kubelet that is gone and
// starts a Register call when the served plugin is not registered and no
// retry is pending.
func (l *loop) keepRegistered(ctx context.Context) {
	p := l.p
	now := socket.StampOf(p.kubelet)
	if now != l.kubeletAt {
		p.setRegistered(false) // a new kubelet, or none
	}
	if l.reg != nil && l.reg.at != now {
		l.reg.cancel() // talking to a kubelet that is gone
		l.reg = nil
	}
	if l.srv != nil && l.retry == nil && l.reg == nil && !p.registered.Load() {
		l.reg = p.startRegister(ctx, l.wg, now)
	}
}

// await waits for the next thing that may need a new round: an event in
// the directory, the retry, the periodic check, the server stopping or
// the Register call ending. It returns false when ctx ended.
func (l *loop) await(ctx context.Context, tick <-chan time.Time) bool {
	var served, registered <-chan error
	if l.srv != nil {
		served = l.srv.done
	}
	if l.reg != nil {
		registered = l.reg.done
	}
	select {
	case <-ctx.Done():
		return false
	case <-l.p.socketEvent:
	case <-l.p.kubeletEvent:
		// A new kubelet: register now, whatever the backoff says.
		l.retry, l.backoff = nil, registerRetry
	case <-l.retry:
		l.retry = nil
	case <-tick:
	case err := <-served:
		l.p.log.Warn("device plugin server stopped", "err", err)
		l.srv.stop()
		l.srv = nil
	case err := <-registered:
		l.registerDone(ctx, err)
	}
	return true
}

// registerDone takes the end of the Register call in flight.
func (l *loop) registerDone(ctx context.Context, err error) {
	r := l.reg
	l.reg = nil
	switch {
	case err != nil && socket.StampOf(l.p.kubelet) != r.at:
		// The call met the kubelet.sock a restart replaced; try the new one now.
	case err != nil:
		l.fail(ctx, "register with the kubelet", err)
	default:
		l.kubeletAt, l.backoff, l.failing = r.at, registerRetry, false
		l.p.setRegistered(true)
		l.p.log.Info("registered with the kubelet", "endpoint", l.p.endpoint, "took", time.Since(r.start))
	}
}

// registration is a Register call in flight.
type registration struct {
	at     socket.Stamp // kubelet.sock when the call began
	start  time.Time
	cancel context.CancelFunc
	done   chan error
}

func (p *plugin) startRegister(ctx context.Context, wg *sync.WaitGroup, at socket.Stamp) *registration {
	ctx, cancel := context.WithCancel(ctx)
	r := &registration{at: at, start: time.Now(), cancel: cancel, done: make(chan error, 1)}
	wg.Go(func() {
		defer cancel()
		r.done <- p.register(ctx)
	})
	return r
}

func (p *plugin) setRegistered(ok bool) {
	p.registered.Store(ok)
	v := 0.0
	if ok {
		v = 1
	}
	p.metrics.registered.WithLabelValues(p.resource).Set(v)
}

// server is one incarnation of the plugin's gRPC server and its socket.
type server struct {
	grpc   *grpc.Server
	socket string
	stamp  socket.Stamp
	done   chan error
}

// serve claims the socket, serves the DevicePlugin service on it and
// checks that it answers before anyone is told about it.
func (p *plugin) serve(ctx context.Context) (*server, error) {
	if err := os.MkdirAll(p.dir, 0o750); err != nil {
		return nil, fmt.Errorf("create device plugin directory: %w", err)
	}
	if err := claimSocket(ctx, p.socket, p.log); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p.socket, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p.socket, err)
	}
	// The socket is removed by stop, and only while it is still ours: a
	// listener would unlink the path even after someone else re-created it.
	l.SetUnlinkOnClose(false)
	s := &server{grpc: grpc.NewServer(), socket: p.socket, stamp: socket.StampOf(p.socket), done: make(chan error, 1)}
	pluginapi.RegisterDevicePluginServer(s.grpc, p)
	go func() { s.done <- s.grpc.Serve(l) }()
	if err := checkServing(ctx, p.socket); err != nil {
		lost := !s.owns()
		s.stop()
		if lost {
			return nil, fmt.Errorf("serve %s: %w", p.socket, errSocketLost)
		}
		return nil, fmt.Errorf("check device plugin server on %s: %w", p.socket, err)
	}
	return s, nil
}

// owns reports whether the socket file is still the one this server made.
func (s *server) owns() bool {
	st := socket.StampOf(s.socket)
	return st.Exists() && st == s.stamp
}

// stop ends the server, its streams with it, and removes its socket.
func (s *server) stop() {
	owned := s.owns()
	s.grpc.Stop()
	if owned {
		_ = os.Remove(s.socket)
	}
}

// checkServing dials the socket and calls GetDevicePluginOptions, as the
// kubelet will once it is told about the socket. It fails fast rather than
// waiting for a reconnection: a socket deleted meanwhile (the kubelet
// cleaning its directory) is served again by the caller.
func checkServing(ctx context.Context, socket string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	conn, err := dial(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	return err
}

// register calls Register on kubelet.sock. The kubelet dials the plugin
// back, asks for its options and starts ListAndWatch before answering.
func (p *plugin) register(ctx context.Context) (err error) {
	defer func(calledOff func() error) {
		switch {
		case err == nil:
			p.metrics.registrations.WithLabelValues(p.resource, "success").Inc()
		case calledOff() == nil: // not cancelled by the plugin itself
			p.metrics.registrations.WithLabelValues(p.resource, "error").Inc()
		}
	}(ctx.Err)
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	conn, err := dial(p.kubelet)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.endpoint,
		ResourceName: p.resource,
		Options:      p.options,
	})
	if err != nil {
		return fmt.Errorf("register %s on %s: %w", p.resource, p.kubelet, err)
	}
	return nil
}

// dial returns a client connection to a unix socket; it connects lazily.
func dial(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socket, err)
	}
	return conn, nil
}

// claimSocket frees path for the plugin's listener (socket.Claim) and
// says when it removed a stale socket.
func claimSocket(ctx context.Context, path string, log *slog.Logger) error {
	removed, err := socket.Claim(ctx, path, "the device plugin")
	if removed {
		log.Info("removed stale device plugin socket", "socket", path)
	}
	return err
}

// watchDevices rescans the device paths whenever an entry in their
// directories is created, removed, renamed or changes mode, and every
// resyncInterval in case an event was lost.
func (p *plugin) watchDevices(ctx context.Context, w *fsnotify.Watcher) {
	defer w.Close()
	watched := map[string]bool{}
	// watch adds the directories not yet watched and drops the others; it
	// reports whether it added any.
	watch := func(dirs []string) bool {
		added := false
		want := map[string]bool{}
		for _, d := range dirs {
			want[d] = true
			if watched[d] {
				continue
			}
			if err := w.Add(d); err != nil {
				p.log.Debug("watch device directory", "dir", d, "err", err)
				continue
			}
			watched[d], added = true, true
		}
		for d := range watched {
			if !want[d] {
				_ = w.Remove(d)
				delete(watched, d)
			}
		}
		return added
	}
	rescan := func() {
		snap, dirs := p.inv.scan()
		// What changed in a directory before its watch began is seen by
		// scanning once more.
		for range 8 {
			if !watch(dirs) {
				break
			}
			snap, dirs = p.inv.scan()
		}
		if p.state.publish(snap) {
			p.metrics.observeDevices(p.resource, snap)
			healthy, unhealthy := snap.counts()
			p.log.Info("devices changed", "healthy", healthy, "unhealthy", unhealthy)
		}
	}
	// The first scan made the initial list; this one also starts the
	// watches and catches what changed in between.
	rescan()
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Write {
				continue // data written to a node says nothing about its presence
			}
			drainEvents(w)
			rescan()
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			p.log.Warn("watch devices", "err", err)
			rescan()
		case <-resync.C:
			rescan()
		}
	}
}

// drainEvents discards the events already queued: one scan covers them.
func drainEvents(w *fsnotify.Watcher) {
	for {
		select {
		case _, ok := <-w.Events:
			if !ok {
				return
			}
		default:
			return
		}
	}
}
