package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/bindery-dev/bindery/restapi"
	"github.com/bindery-dev/bindery/web"
)

// catalogOptions are the flags of the catalog server.
type catalogOptions struct {
	listen        string
	encryptionKey string
	relistCheck   time.Duration
}

func (o *catalogOptions) addFlags(fs *flag.FlagSet, listenFlag, listen string) {
	fs.StringVar(&o.listen, listenFlag, listen, "HOST:PORT to serve the REST API (and web UI) on")
	fs.DurationVar(&o.relistCheck, "relist-check-interval", time.Second, "how often to look for brokers whose relist is due")
	if fs.Lookup("encryption-key") == nil {
		fs.StringVar(&o.encryptionKey, "encryption-key", "", "comma-separated base64 32-byte keys sealing secrets at rest; the first encrypts")
	}
}

func (o *catalogOptions) complete() error {
	var errs []error
	if _, err := keyring.Parse(o.encryptionKey); err != nil {
		errs = append(errs, err)
	}
	if o.relistCheck <= 0 {
		errs = append(errs, errors.New("--relist-check-interval: must be positive"))
	}
	return errors.Join(errs...)
}

func runServeCatalog(ctx context.Context, e env, args []string) error {
	var o catalogOptions
	log, pool, err := startServer(ctx, e, "serve catalog", args,
		func(fs *flag.FlagSet) { o.addFlags(fs, "listen", ":8080") },
		func(*dbOptions) []error { return []error{o.complete()} }, migrations.Catalog)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, err := serve.Listen(o.listen)
	if err != nil {
		return err
	}
	store, err := newCatalogStore(pool, o.encryptionKey, log)
	if err != nil {
		return err
	}
	return runCatalog(ctx, log, store, &o, l)
}

func newCatalogStore(pool *pgxpool.Pool, key string, log *slog.Logger) (*catalog.Store, error) {
	keys, err := keyring.Parse(key)
	if err != nil {
		return nil, err
	}
	return catalog.NewStore(pool, keys, log.With("component", "catalog")), nil
}

// runCatalog serves the REST API on l and relists brokers until ctx ends.
func runCatalog(ctx context.Context, log *slog.Logger, store *catalog.Store, o *catalogOptions, l net.Listener) error {
	log = log.With("component", "catalog")
	reg := serve.NewRegistry()
	api := restapi.New(store, log)
	e := serve.NewEcho(log, reg, func(ctx context.Context) error { return store.Pool().Ping(ctx) })
	e.HTTPErrorHandler = api.ErrorHandler
	api.Register(e)
	web.Register(e, store, log)
	relistCtx, stop := context.WithCancel(ctx)
	defer stop()
	go store.RunRelister(relistCtx, o.relistCheck)
	log.Info("serving the REST API and the web UI", "addr", l.Addr().String())
	return serve.Run(ctx, l, e, log)
}
