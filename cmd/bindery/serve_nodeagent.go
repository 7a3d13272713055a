package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/nodeagent"
	"github.com/bindery-dev/bindery/nodeagent/cni"
	"github.com/bindery-dev/bindery/nodeagent/deviceplugin"
)

// nodeagentOptions are the flags of the node agent.
type nodeagentOptions struct {
	listen          string
	config          string
	devicePluginDir string
	hostRoot        string
}

func (o *nodeagentOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", ":8083", "HOST:PORT to serve health and metrics on")
	fs.StringVar(&o.config, "config", "", "node agent configuration `file` (YAML, with devicePlugins)")
	fs.StringVar(&o.devicePluginDir, "device-plugin-dir", deviceplugin.DefaultDir, "kubelet device-plugin `directory`, holding kubelet.sock and the plugins' sockets")
	fs.StringVar(&o.hostRoot, "host-root", "", "`directory` where the node's root file system is mounted, when the agent runs in a container that does not see the node's /dev at /dev")
}

// complete reports every problem with the flags together.
func (o *nodeagentOptions) complete() error {
	var errs []error
	if o.config == "" {
		errs = append(errs, errors.New("--config (BINDERY_CONFIG) is required"))
	}
	if o.devicePluginDir == "" {
		errs = append(errs, errors.New("--device-plugin-dir must not be empty"))
	}
	return errors.Join(errs...)
}

func runServeNodeagent(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "serve nodeagent")
	var o nodeagentOptions
	o.addFlags(fs)
	var cniOpts cni.InstallOptions
	cniOpts.AddFlags(fs)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cniOpts.Requested() {
		return runInstallCNI(e, *level, &cniOpts)
	}
	if err := o.complete(); err != nil {
		return err
	}
	log, err := e.logger(*level)
	if err != nil {
		return err
	}
	cfg, err := nodeagent.LoadConfig(o.config)
	if err != nil {
		return err
	}
	l, err := serve.Listen(o.listen)
	if err != nil {
		return err
	}
	return runNodeagent(ctx, log, cfg, &o, l)
}

// runNodeagent serves the device plugins, and health and metrics on l,
// until ctx ends or a plugin cannot start.
func runNodeagent(ctx context.Context, log *slog.Logger, cfg *nodeagent.Config, o *nodeagentOptions, l net.Listener) error {
	log = log.With("component", "nodeagent")
	reg := serve.NewRegistry()
	m, err := deviceplugin.NewManager(cfg.DevicePlugins, deviceplugin.Options{
		Dir:        o.devicePluginDir,
		HostRoot:   o.hostRoot,
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		_ = l.Close()
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := m.Run(ctx); err != nil {
			return fmt.Errorf("device plugins: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		log.Info("serving health and metrics", "addr", l.Addr().String())
		return serve.Run(ctx, l, serve.NewEcho(log, reg, m.Ready), log)
	})
	return g.Wait()
}

// runInstallCNI installs or uninstalls bindery-cni on this node and returns:
// it runs as the node agent's init container, before the agent serves.
func runInstallCNI(e env, level string, o *cni.InstallOptions) error {
	log, err := e.logger(level)
	if err != nil {
		return err
	}
	return o.Run(log.With("component", "nodeagent", "task", "cni"))
}
