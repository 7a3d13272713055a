package nodeagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/nodeagent/csi"
	"github.com/bindery-dev/bindery/nodeagent/deviceplugin"
)

// Options are the node agent's command-line settings.
type Options struct {
	// Listen is HOST:PORT to serve health and metrics on.
	Listen string
	// ConfigFile is the agent's YAML configuration (see Config).
	ConfigFile      string
	DevicePluginDir string
	// HostRoot is where the node's root file system is mounted when the
	// agent runs in a container that does not see the node's /dev at /dev.
	HostRoot string
	// CSI turns on the CSI driver csi.bindery.dev, with its settings.
	CSI bool
	CSIOptions
}

// CSIOptions are the CSI driver's settings.
type CSIOptions struct {
	NodeName        string
	KubeletDir      string
	APIServer       string
	APIServerCA     string
	Audience        string
	RefreshInterval time.Duration
	// MaxVolumes, MaxVolumesPerNamespace and MaxVolumesPerPod bound the
	// volumes the driver publishes on the node, for one namespace and for
	// one Pod.
	MaxVolumes, MaxVolumesPerNamespace, MaxVolumesPerPod int
}

// AddFlags registers the node agent's flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":8083", "HOST:PORT to serve health and metrics on")
	fs.StringVar(&o.ConfigFile, "config", "", "node agent configuration `file` (YAML, with devicePlugins)")
	fs.StringVar(&o.DevicePluginDir, "device-plugin-dir", deviceplugin.DefaultDir, "kubelet device-plugin `directory`, holding kubelet.sock and the plugins' sockets")
	fs.StringVar(&o.HostRoot, "host-root", "", "`directory` where the node's root file system is mounted, when the agent runs in a container that does not see the node's /dev at /dev")
	fs.BoolVar(&o.CSI, "csi", false, "serve the CSI driver csi.bindery.dev, which mounts bindings' credentials into Pods without Secrets")
	fs.StringVar(&o.NodeName, "node-name", "", "the node's name as the kubelet registers it (the CSI driver's node ID); this host's name when empty")
	fs.StringVar(&o.KubeletDir, "csi-kubelet-dir", "/var/lib/kubelet", "the kubelet's root `directory`: the CSI driver's socket goes under plugins/, its registration under plugins_registry/, and Pods' volumes are under pods/")
	fs.StringVar(&o.APIServer, "csi-apiserver", "https://bindery-apiserver.bindery-system.svc:443", "`URL` of Bindery's aggregated API server (its Service), which the CSI driver asks for credentials directly")
	fs.StringVar(&o.APIServerCA, "csi-apiserver-ca", "", "CA bundle `file` that verifies --csi-apiserver (the APIService's caBundle); the system's roots when empty")
	fs.StringVar(&o.Audience, "csi-audience", csi.DefaultAudience, "audience of the Pods' service-account tokens the CSI driver uses (the CSIDriver's tokenRequests; the API server's --credentials-audience)")
	fs.DurationVar(&o.RefreshInterval, "csi-refresh-interval", csi.DefaultRefreshInterval, "how often the CSI driver reads mounted credentials again, besides the kubelet's republish; 0: only then")
	fs.IntVar(&o.MaxVolumes, "csi-max-volumes", csi.DefaultMaxVolumes, "the most volumes the CSI driver publishes on this node; beyond, a Pod's volume waits (RESOURCE_EXHAUSTED, retried by the kubelet)")
	fs.IntVar(&o.MaxVolumesPerNamespace, "csi-max-volumes-per-namespace", 0, "the most volumes of the CSI driver the Pods of one namespace may have published on this node (0: a quarter of --csi-max-volumes)")
	fs.IntVar(&o.MaxVolumesPerPod, "csi-max-volumes-per-pod", csi.DefaultMaxVolumesPerPod, "the most volumes of the CSI driver one Pod may have published")
}

// Validate reports every problem with the options together.
func (o *Options) Validate() error {
	errs := []error{serve.CheckListen("--listen", o.Listen)}
	if o.ConfigFile == "" && !o.CSI {
		errs = append(errs, errors.New("--config (BINDERY_CONFIG) is required, unless the agent serves only the CSI driver (--csi)"))
	}
	if o.CSI {
		if host, _ := os.Hostname(); o.NodeName == "" && host == "" {
			errs = append(errs, errors.New("--node-name (BINDERY_NODE_NAME) is required with --csi: this host has no name"))
		}
		if o.APIServer == "" {
			errs = append(errs, errors.New("--csi-apiserver must not be empty with --csi"))
		}
		if o.KubeletDir == "" {
			errs = append(errs, errors.New("--csi-kubelet-dir must not be empty with --csi"))
		}
		if o.RefreshInterval < 0 {
			errs = append(errs, errors.New("--csi-refresh-interval must not be negative"))
		}
		if o.MaxVolumes <= 0 {
			errs = append(errs, errors.New("--csi-max-volumes must be positive"))
		}
		if o.MaxVolumesPerNamespace < 0 {
			errs = append(errs, errors.New("--csi-max-volumes-per-namespace must not be negative (0: a quarter of --csi-max-volumes)"))
		}
		if o.MaxVolumesPerPod <= 0 {
			errs = append(errs, errors.New("--csi-max-volumes-per-pod must be positive"))
		}
	}
	if o.DevicePluginDir == "" && (o.ConfigFile != "" || !o.CSI) {
		errs = append(errs, errors.New("--device-plugin-dir must not be empty"))
	}
	return errors.Join(errs...)
}

// AgentConfig is what the node agent runs with.
type AgentConfig struct {
	// File is nil without --config: no device plugins.
	File    *Config
	Plugins deviceplugin.Options
	// CSI is nil without --csi.
	CSI    *csi.Options
	Logger *slog.Logger
}

// Config reads and validates the configuration file.
func (o *Options) Config(log *slog.Logger) (*AgentConfig, error) {
	cfg := &AgentConfig{
		Plugins: deviceplugin.Options{Dir: o.DevicePluginDir, HostRoot: o.HostRoot, Logger: log},
		Logger:  log,
	}
	if o.ConfigFile != "" {
		file, err := LoadConfig(o.ConfigFile)
		if err != nil {
			return nil, err
		}
		cfg.File = file
	}
	if o.CSI {
		refresh := o.RefreshInterval
		if refresh == 0 {
			refresh = -1 // the flag's 0 is "only the kubelet's republish"
		}
		node := o.NodeName
		if node == "" {
			node, _ = os.Hostname()
		}
		cfg.CSI = &csi.Options{
			NodeID:          node,
			RegistrationDir: filepath.Join(o.KubeletDir, "plugins_registry"),
			PluginDir:       filepath.Join(o.KubeletDir, "plugins", csi.Name),
			APIServer:       o.APIServer, APIServerCA: o.APIServerCA,
			Audience:        o.Audience,
			RefreshInterval: refresh,
			MaxVolumes:      o.MaxVolumes, MaxVolumesPerNamespace: o.MaxVolumesPerNamespace, MaxVolumesPerPod: o.MaxVolumesPerPod,
			Logger: log.With("driver", csi.Name),
		}
	}
	return cfg, nil
}

// Run serves the device plugins and the CSI driver that cfg asks for, and
// health and metrics on l, until ctx ends or one cannot start; it returns
// once all have stopped. Ready means every part is registered with the
// kubelet.
func Run(ctx context.Context, cfg *AgentConfig, l net.Listener) error {
	log := cfg.Logger
	reg := serve.NewRegistry()
	var parts []func(context.Context) error
	var checks []func(context.Context) error
	if cfg.File != nil {
		opts := cfg.Plugins
		opts.Registerer = reg
		m, err := deviceplugin.NewManager(cfg.File.DevicePlugins, opts)
		if err != nil {
			_ = l.Close()
			return err
		}
		parts = append(parts, func(ctx context.Context) error {
			if err := m.Run(ctx); err != nil {
				return fmt.Errorf("device plugins: %w", err)
			}
			return nil
		})
		checks = append(checks, m.Ready)
	}
	if cfg.CSI != nil {
		opts := *cfg.CSI
		opts.Registerer = reg
		d, err := csi.New(opts)
		if err != nil {
			_ = l.Close()
			return err
		}
		parts = append(parts, d.Run)
		checks = append(checks, d.Ready)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, run := range parts {
		g.Go(func() error { return run(gctx) })
	}
	ready := func(ctx context.Context) error {
		var errs []error
		for _, c := range checks {
			errs = append(errs, c(ctx))
		}
		return errors.Join(errs...)
	}
	g.Go(func() error {
		log.Info("serving health and metrics", "addr", l.Addr().String())
		return serve.Run(gctx, l, serve.NewEcho(log, reg, ready), log)
	})
	return g.Wait()
}
