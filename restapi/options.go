package restapi

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/share"
)

// Options are the catalog server's command-line settings: the REST API
// and the broker relister that runs beside it. The database and the
// encryption keys belong to the command, which hands Config the store.
type Options struct {
	// Listen is HOST:PORT to serve the REST API (and web UI) on.
	Listen string
	// listenFlag is the flag that set Listen ("" when no flag did),
	// which Validate names.
	listenFlag string
	// RelistCheck is how often to look for brokers whose relist is due.
	RelistCheck time.Duration
	// MaxInflightPerToken bounds each API token's requests in flight (0:
	// no bound).
	MaxInflightPerToken int
}

// AddFlags registers the catalog server's flags; listenFlag names the
// listen address's flag (it differs when several components share a
// command).
func (o *Options) AddFlags(fs *flag.FlagSet, listenFlag, listenDefault string) {
	fs.StringVar(&o.Listen, listenFlag, listenDefault, "HOST:PORT to serve the REST API (and web UI) on")
	o.listenFlag = "--" + listenFlag
	fs.DurationVar(&o.RelistCheck, "relist-check-interval", time.Second, "how often to look for brokers whose relist is due")
	fs.IntVar(&o.MaxInflightPerToken, "api-max-inflight-per-token", DefaultMaxInflightPerToken,
		"requests one API token may have served at once, REST API and web UI together, 4 times as many waiting up to 10s each, and 4 times as many web UI live pages open; beyond, 429 (0: no bound)")
}

// Validate reports every problem with the options together.
func (o *Options) Validate() error {
	var errs []error
	if o.listenFlag != "" {
		errs = append(errs, serve.CheckListen(o.listenFlag, o.Listen))
	}
	if o.RelistCheck <= 0 {
		errs = append(errs, errors.New("--relist-check-interval: must be positive"))
	}
	if o.MaxInflightPerToken < 0 {
		errs = append(errs, errors.New("--api-max-inflight-per-token: must not be negative"))
	}
	return errors.Join(errs...)
}

// Config is what the catalog server runs with.
type Config struct {
	Store       *catalog.Store
	Logger      *slog.Logger
	RelistCheck time.Duration
	// MaxInflightPerToken bounds each API token's requests in flight.
	MaxInflightPerToken int
	// Mount adds routes beside /api/v1 (the web UI, for one), each called
	// once with the server's echo instance after the API is registered,
	// and the API's bound on each token's requests, to take from too.
	Mount []func(*echo.Echo, *share.Share)
	// Ready are readiness checks besides the store's, for /readyz.
	Ready []serve.Check
}

// Config returns the server's Config over store.
func (o *Options) Config(store *catalog.Store, log *slog.Logger) *Config {
	return &Config{Store: store, Logger: log, RelistCheck: o.RelistCheck, MaxInflightPerToken: o.MaxInflightPerToken}
}

// Run serves the REST API (and what Mount adds) on l and relists brokers
// until ctx ends; it returns once both have stopped.
func Run(ctx context.Context, cfg *Config, l net.Listener) error {
	store, log := cfg.Store, cfg.Logger
	api := New(store, log)
	api.SetMaxInflightPerToken(cfg.MaxInflightPerToken)
	reg := serve.NewRegistry()
	reg.MustRegister(api.Metrics())
	// /metrics is the API's (MountMetrics): what it shows depends on the
	// scrape's token.
	e := serve.NewEcho(log, nil, append(slices.Clip(cfg.Ready), func(ctx context.Context) error { return store.Ping(ctx) })...)
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	api.MountMetrics(e, reg, NewQuotaCollector(store, log), NewRelistCollector(store, log))
	for _, mount := range cfg.Mount {
		mount(e, api.Share())
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		store.RunRelister(gctx, cfg.RelistCheck)
		return nil
	})
	// Whichever processes own the catalog prune its change feed; a claim in
	// PostgreSQL makes one of them do each round.
	g.Go(func() error {
		store.Feed().RunPruner(gctx, catalog.Retention{})
		return nil
	})
	g.Go(func() error {
		api.Run(gctx)
		return nil
	})
	g.Go(func() error {
		log.Info("serving the REST API", "addr", l.Addr().String(), "mounted", len(cfg.Mount))
		return serve.Run(gctx, l, e, log)
	})
	return g.Wait()
}
