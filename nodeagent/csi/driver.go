package csi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/bindery-dev/bindery/nodeagent/internal/socket"
)

// Name is the driver's name: the CSIDriver object's, and what Pods' inline
// volumes say in csi.driver.
const Name = "csi.bindery.dev"

// The kubelet's default directories (its --root-dir is /var/lib/kubelet).
const (
	// DefaultRegistrationDir is where the kubelet's plugin watcher looks
	// for registration sockets.
	DefaultRegistrationDir = "/var/lib/kubelet/plugins_registry"
	// DefaultPluginDir holds the driver's CSI socket.
	DefaultPluginDir = "/var/lib/kubelet/plugins/" + Name
	// DefaultAudience is the audience of the Pods' tokens the driver asks
	// for (the CSIDriver's tokenRequests) and the API server accepts.
	DefaultAudience = "bindery.dev"
	// DefaultRefreshInterval is how often the driver reads the credentials
	// of every volume again, besides the kubelet's republish.
	DefaultRefreshInterval = 10 * time.Second
	// DefaultMaxVolumes and DefaultMaxVolumesPerPod bound the volumes the
	// driver serves on a node and for one Pod: each is a tmpfs mount and
	// a read of the API server every refresh interval, and a Pod may name
	// any number of inline volumes (neither the scheduler nor the kubelet
	// counts them). One namespace's Pods may have a quarter of the node's
	// bound unless told otherwise (Options.MaxVolumesPerNamespace), so one
	// tenant's Pods leave the node to the others.
	DefaultMaxVolumes       = 1000
	DefaultMaxVolumesPerPod = 32
)

// Options configure the driver.
type Options struct {
	// NodeID is the node's name, as the kubelet knows it.
	NodeID string
	// RegistrationDir and PluginDir: DefaultRegistrationDir and
	// DefaultPluginDir when empty.
	RegistrationDir, PluginDir string
	// KubeletPluginDir is PluginDir as the kubelet sees it, when the
	// agent runs in a container that mounts it elsewhere; PluginDir when
	// empty.
	KubeletPluginDir string
	// APIServer is the URL of Bindery's aggregated API server, reached
	// directly (its Service), and APIServerCA the CA bundle that verifies
	// it (the APIService's caBundle); the system's roots when empty.
	APIServer, APIServerCA string
	// Audience is the Pods' tokens' audience; DefaultAudience when empty.
	Audience string
	// RefreshInterval is how often mounted credentials are read again by
	// the driver itself; DefaultRefreshInterval when zero, never when
	// negative (the kubelet's republish only).
	RefreshInterval time.Duration
	// MaxVolumes, MaxVolumesPerNamespace and MaxVolumesPerPod bound the
	// volumes published on the node, for one namespace and for one Pod
	// (when not positive: DefaultMaxVolumes, a quarter of MaxVolumes and
	// DefaultMaxVolumesPerPod): a publish beyond is RESOURCE_EXHAUSTED.
	MaxVolumes, MaxVolumesPerNamespace, MaxVolumesPerPod int
	// Logger receives the driver's logs; nothing is logged when nil.
	Logger *slog.Logger
	// Registerer receives the driver's metrics; none when nil.
	Registerer prometheus.Registerer
}

// Driver is the CSI node driver csi.bindery.dev: the Identity and Node
// services on a unix socket, registered with the kubelet through its
// plugin watcher. It has no controller service: its volumes are inline in
// Pods (ephemeral) and exist only while mounted.
type Driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer

	opts       Options
	socket     string // the CSI socket
	regSocket  string // the registration socket
	client     *apiClient
	log        *slog.Logger
	metrics    *metrics
	registered atomic.Bool

	mu      sync.Mutex
	volumes map[string]*volume // by target path
	perPod  map[string]int     // volumes by Pod UID
	perNS   map[string]int     // volumes by Pod namespace
}

// New checks the options and builds the driver; Run serves it.
func New(opts Options) (*Driver, error) {
	var errs []error
	if opts.NodeID == "" {
		errs = append(errs, errors.New("node name: required (--node-name or NODE_NAME)"))
	}
	if opts.APIServer == "" {
		errs = append(errs, errors.New("the URL of Bindery's API server: required"))
	}
	opts.RegistrationDir = cmp.Or(opts.RegistrationDir, DefaultRegistrationDir)
	opts.PluginDir = cmp.Or(opts.PluginDir, DefaultPluginDir)
	opts.KubeletPluginDir = cmp.Or(opts.KubeletPluginDir, opts.PluginDir)
	opts.Audience = cmp.Or(opts.Audience, DefaultAudience)
	if opts.RefreshInterval == 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	if opts.MaxVolumes <= 0 {
		opts.MaxVolumes = DefaultMaxVolumes
	}
	if opts.MaxVolumesPerNamespace <= 0 {
		opts.MaxVolumesPerNamespace = max(1, opts.MaxVolumes/4)
	}
	if opts.MaxVolumesPerPod <= 0 {
		opts.MaxVolumesPerPod = DefaultMaxVolumesPerPod
	}
	d := &Driver{
		opts:      opts,
		socket:    filepath.Join(opts.PluginDir, "csi.sock"),
		regSocket: filepath.Join(opts.RegistrationDir, Name+"-reg.sock"),
		log:       cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		volumes:   map[string]*volume{},
		perPod:    map[string]int{},
		perNS:     map[string]int{},
	}
	for _, s := range []string{d.socket, d.regSocket} {
		if len(s) > 107 {
			errs = append(errs, fmt.Errorf("socket %s is longer than the 107 bytes a unix socket address holds", s))
		}
	}
	var err error
	if opts.APIServer != "" {
		if d.client, err = newAPIClient(opts.APIServer, opts.APIServerCA); err != nil {
			errs = append(errs, err)
		}
	}
	if d.metrics, err = newMetrics(opts.Registerer); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("CSI driver: %w", err)
	}
	return d, nil
}

// Socket is the path of the driver's CSI socket.
func (d *Driver) Socket() string { return d.socket }

// Run serves the CSI socket and the registration socket until ctx ends,
// keeps credentials fresh, and removes both sockets when it stops. A
// socket left by an earlier run is replaced; one another process serves
// stops it.
func (d *Driver) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	csiSrv := grpc.NewServer()
	csipb.RegisterIdentityServer(csiSrv, d)
	csipb.RegisterNodeServer(csiSrv, d)
	regSrv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regSrv, registration{d: d})
	// The CSI socket first: the kubelet dials it as soon as it has read
	// the registration socket.
	for _, s := range []struct {
		srv  *grpc.Server
		path string
	}{{csiSrv, d.socket}, {regSrv, d.regSocket}} {
		l, err := listen(ctx, s.path)
		if err != nil {
			csiSrv.Stop()
			regSrv.Stop()
			return err
		}
		g.Go(func() error { return serveSocket(ctx, s.srv, l, s.path) })
	}
	d.log.Info("serving the CSI driver", "driver", Name, "socket", d.socket, "registration", d.regSocket, "apiserver", d.opts.APIServer)
	g.Go(func() error { d.watchRegistration(ctx, regSrv); return nil })
	if d.opts.RefreshInterval > 0 {
		g.Go(func() error { d.refreshLoop(ctx); return nil })
	}
	return g.Wait()
}

// listen claims path (a stale socket is removed; a live one is an error)
// and listens on it, readable by root only: the kubelet and the agent.
func listen(ctx context.Context, path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if _, err := socket.Claim(ctx, path, "the CSI driver"); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// serveSocket serves until ctx ends, then stops gracefully and removes the
// socket.
func serveSocket(ctx context.Context, srv *grpc.Server, l net.Listener, path string) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case <-ctx.Done():
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			srv.Stop()
		}
		<-done
		_ = os.Remove(path)
		return nil
	case err := <-done:
		return fmt.Errorf("serve %s: %w", path, err)
	}
}

// Ready reports whether the kubelet has registered the driver: the node
// agent's readiness check.
func (d *Driver) Ready(context.Context) error {
	if !d.registered.Load() {
		return fmt.Errorf("CSI driver %s is not registered with the kubelet", Name)
	}
	return nil
}
