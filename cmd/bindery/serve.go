package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/share"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/nodeagent"
	"github.com/bindery-dev/bindery/nodeagent/cni"
	"github.com/bindery-dev/bindery/restapi"
	"github.com/bindery-dev/bindery/web"
)

// components are the servers `bindery serve NAME` runs, one per package.
var components = map[string]func(ctx context.Context, e env, args []string) error{
	"apiserver":  runServeAPIServer,
	"broker":     runServeBroker,
	"catalog":    runServeCatalog,
	"controller": runServeController,
	"nodeagent":  runServeNodeagent,
	"webhook":    runServeWebhook,
}

func componentNames() []string {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runServe(ctx context.Context, e env, args []string) error {
	if helpAsked(args) {
		fmt.Fprintf(e.stderr, "usage: bindery serve %s [flags]\n\nRuns one component; `bindery serve COMPONENT -h` lists its flags.\n", strings.Join(componentNames(), "|"))
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return usagef("serve: name a component: %v", componentNames())
	}
	run, ok := components[args[0]]
	if !ok {
		return usagef("serve: unknown component %q (have %v)", args[0], componentNames())
	}
	return run(ctx, e, args[1:])
}

// What --encryption-key's keys seal, per component.
const (
	sealsCredentials = "credentials"
	sealsSecrets     = "secrets"
)

func runServeBroker(ctx context.Context, e env, args []string) error {
	var s server
	var o broker.Options
	log, pool, keys, err := s.start(ctx, e, "serve broker", args, sealsCredentials,
		func(fs *flag.FlagSet) { o.AddFlags(fs, "listen", ":8081") },
		func(db *dbOptions) error { o.Complete(db.url); return o.Validate() }, migrations.Broker)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, err := serve.Listen("--listen", o.Listen)
	if err != nil {
		return err
	}
	return runBroker(ctx, log, pool, keys, &o, l)
}

// runBroker serves the broker, with the PostgreSQL driver, on l until ctx
// ends; ready are readiness checks besides its database's.
func runBroker(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool, keys *keyring.Keyring, o *broker.Options, l net.Listener, ready ...serve.Check) error {
	log = log.With("component", "broker")
	cfg, err := o.Config(pool, keys, log)
	if err != nil {
		_ = l.Close()
		return err
	}
	cfg.Ready = ready
	pg, err := postgresql.New(ctx, o.TargetURL, log, postgresql.WithReservedConnections(o.TargetReserved))
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("postgresql driver: %w", err)
	}
	defer pg.Close()
	cfg.Drivers["postgresql"] = pg
	return broker.Run(ctx, cfg, l)
}

// brokerCaller is the Options of a component that calls brokers with the
// catalog's store (the catalog, the engine).
type brokerCaller interface {
	AddFlags(fs *flag.FlagSet, listenFlag, listenDefault string)
	Validate() error
}

// startBrokerCaller is server.start for a component that calls brokers:
// its flags (--listen defaulting to listen), the broker-call flags and the
// catalog's schema; it gives the store's options too.
func (s *server) startBrokerCaller(ctx context.Context, e env, name string, args []string, o brokerCaller, listen string, limits *storeLimits) (*slog.Logger, *pgxpool.Pool, *keyring.Keyring, []catalog.Option, error) {
	var bc brokerCalls
	var storeOpts []catalog.Option
	log, pool, keys, err := s.start(ctx, e, name, args, sealsSecrets,
		func(fs *flag.FlagSet) {
			o.AddFlags(fs, "listen", listen)
			bc.addFlags(fs, false)
			if limits != nil {
				limits.addFlags(fs)
			}
		},
		func(*dbOptions) (err error) {
			storeOpts, err = bc.storeOptions()
			errs := []error{o.Validate(), err}
			if limits != nil {
				opts, err := limits.storeOptions()
				storeOpts = append(storeOpts, opts...)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}, migrations.Catalog)
	return log, pool, keys, storeOpts, err
}

func runServeCatalog(ctx context.Context, e env, args []string) error {
	var s server
	var o restapi.Options
	log, pool, keys, storeOpts, err := s.startBrokerCaller(ctx, e, "serve catalog", args, &o, ":8080", &storeLimits{})
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := openStore(ctx, pool, keys, log, storeOpts...)
	if err != nil {
		return err
	}
	l, err := serve.Listen("--listen", o.Listen)
	if err != nil {
		return err
	}
	return runCatalog(ctx, log, store, &o, l)
}

func runServeController(ctx context.Context, e env, args []string) error {
	var s server
	var o controller.Options
	log, pool, keys, storeOpts, err := s.startBrokerCaller(ctx, e, "serve controller", args, &o, ":8082", nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	// client-go (its informers, the Events recorder) logs through klog:
	// send it to the same handler.
	clog := log.With("component", "controller")
	klog.SetSlogLogger(clog)
	g, gctx := errgroup.WithContext(ctx)
	cluster, err := o.ConnectCluster(gctx)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, pool, keys, log, append(storeOpts, cluster.StoreOptions()...)...)
	if err != nil {
		return err
	}
	l, err := serve.Listen("--listen", o.Listen)
	if err != nil {
		return err
	}
	g.Go(func() error { return cluster.Run(gctx) })
	g.Go(func() error { return controller.Run(gctx, o.Config(store, cluster, clog), l) })
	return g.Wait()
}

func runServeNodeagent(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "serve nodeagent")
	var o nodeagent.Options
	o.AddFlags(fs)
	var cniOpts cni.InstallOptions
	cniOpts.AddFlags(fs)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cniOpts.Requested() {
		return runInstallCNI(e, *level, &cniOpts)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	log, err := e.logger(*level)
	if err != nil {
		return err
	}
	cfg, err := o.Config(log.With("component", "nodeagent"))
	if err != nil {
		return err
	}
	l, err := serve.Listen("--listen", o.Listen)
	if err != nil {
		return err
	}
	return nodeagent.Run(ctx, cfg, l)
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

// runCatalog serves the REST API, with the web UI mounted beside it, on l
// and relists brokers until ctx ends.
func runCatalog(ctx context.Context, log *slog.Logger, store *catalog.Store, o *restapi.Options, l net.Listener, ready ...serve.Check) error {
	log = log.With("component", "catalog")
	cfg := o.Config(store, log)
	cfg.Ready = ready
	cfg.Mount = append(cfg.Mount, func(e *echo.Echo, sh *share.Share) { web.Register(e, store, log, sh) })
	return restapi.Run(ctx, cfg, l)
}
