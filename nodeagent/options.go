package nodeagent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/internal/serve"
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
}

// AddFlags registers the node agent's flags.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", ":8083", "HOST:PORT to serve health and metrics on")
	fs.StringVar(&o.ConfigFile, "config", "", "node agent configuration `file` (YAML, with devicePlugins)")
	fs.StringVar(&o.DevicePluginDir, "device-plugin-dir", deviceplugin.DefaultDir, "kubelet device-plugin `directory`, holding kubelet.sock and the plugins' sockets")
	fs.StringVar(&o.HostRoot, "host-root", "", "`directory` where the node's root file system is mounted, when the agent runs in a container that does not see the node's /dev at /dev")
}

// Validate reports every problem with the options together.
func (o *Options) Validate() error {
	var errs []error
	if o.ConfigFile == "" {
		errs = append(errs, errors.New("--config (BINDERY_CONFIG) is required"))
	}
	if o.DevicePluginDir == "" {
		errs = append(errs, errors.New("--device-plugin-dir must not be empty"))
	}
	return errors.Join(errs...)
}

// AgentConfig is what the node agent runs with.
type AgentConfig struct {
	File    *Config
	Plugins deviceplugin.Options
	Logger  *slog.Logger
}

// Config reads and validates the configuration file.
func (o *Options) Config(log *slog.Logger) (*AgentConfig, error) {
	file, err := LoadConfig(o.ConfigFile)
	if err != nil {
		return nil, err
	}
	return &AgentConfig{
		File:    file,
		Plugins: deviceplugin.Options{Dir: o.DevicePluginDir, HostRoot: o.HostRoot, Logger: log},
		Logger:  log,
	}, nil
}

// Run serves the device plugins, and health and metrics on l, until ctx
// ends or a plugin cannot start; it returns once both have stopped.
func Run(ctx context.Context, cfg *AgentConfig, l net.Listener) error {
	log := cfg.Logger
	reg := serve.NewRegistry()
	opts := cfg.Plugins
	opts.Registerer = reg
	m, err := deviceplugin.NewManager(cfg.File.DevicePlugins, opts)
	if err != nil {
		_ = l.Close()
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := m.Run(gctx); err != nil {
			return fmt.Errorf("device plugins: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		log.Info("serving health and metrics", "addr", l.Addr().String())
		return serve.Run(gctx, l, serve.NewEcho(log, reg, m.Ready), log)
	})
	return g.Wait()
}
