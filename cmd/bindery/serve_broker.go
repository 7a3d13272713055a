package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/migrations"
)

// brokerOptions are the flags of the OSB broker.
type brokerOptions struct {
	listen           string
	username         string
	password         string
	token            string
	catalog          string
	targetURL        string
	encryptionKey    string
	operationTimeout time.Duration
	workers          int
}

func (o *brokerOptions) addFlags(fs *flag.FlagSet, listenFlag, listen string) {
	fs.StringVar(&o.listen, listenFlag, listen, "HOST:PORT to serve the OSB API on")
	fs.StringVar(&o.username, "broker-username", "", "HTTP basic auth username platforms must present")
	fs.StringVar(&o.password, "broker-password", "", "HTTP basic auth password platforms must present")
	fs.StringVar(&o.token, "broker-token", "", "bearer token platforms may present instead of basic auth")
	fs.StringVar(&o.catalog, "catalog", "", "YAML catalogue file (default: the embedded PostgreSQL catalogue)")
	fs.StringVar(&o.targetURL, "target-database-url", "", "PostgreSQL cluster where instances are created (default: the cluster of --database-url)")
	fs.StringVar(&o.encryptionKey, "encryption-key", "", "comma-separated base64 32-byte keys sealing credentials at rest; the first encrypts")
	fs.DurationVar(&o.operationTimeout, "operation-timeout", 5*time.Minute, "longest one attempt of an operation may run; a crashed operation resumes after it")
	fs.IntVar(&o.workers, "workers", 10, "operations run at once by this process")
}

// complete fills what can be derived and reports every problem together.
func (o *brokerOptions) complete(db *dbOptions) error {
	var errs []error
	if o.targetURL == "" {
		o.targetURL = db.url
	}
	if _, err := keyring.Parse(o.encryptionKey); err != nil {
		errs = append(errs, err)
	}
	if o.username == "" && o.password == "" && o.token == "" {
		errs = append(errs, errors.New("no broker credentials: set --broker-username and --broker-password (BINDERY_BROKER_USERNAME, BINDERY_BROKER_PASSWORD) or --broker-token"))
	} else if (o.username == "") != (o.password == "") {
		errs = append(errs, errors.New("--broker-username and --broker-password go together"))
	}
	if o.operationTimeout <= 0 {
		errs = append(errs, errors.New("--operation-timeout: must be positive"))
	}
	if o.workers <= 0 {
		errs = append(errs, errors.New("--workers: must be positive"))
	}
	return errors.Join(errs...)
}

func runServeBroker(ctx context.Context, e env, args []string) error {
	var o brokerOptions
	log, pool, err := startServer(ctx, e, "serve broker", args,
		func(fs *flag.FlagSet) { o.addFlags(fs, "listen", ":8081") },
		func(db *dbOptions) []error { return []error{o.complete(db)} }, migrations.Broker)
	if err != nil {
		return err
	}
	defer pool.Close()
	l, err := serve.Listen(o.listen)
	if err != nil {
		return err
	}
	return runBroker(ctx, log, pool, &o, l)
}

// runBroker serves the broker on l until ctx ends.
func runBroker(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool, o *brokerOptions, l net.Listener) error {
	log = log.With("component", "broker")
	keys, err := keyring.Parse(o.encryptionKey)
	if err != nil {
		return err
	}
	catalog, err := broker.LoadCatalog(o.catalog)
	if err != nil {
		return err
	}
	pg, err := postgresql.New(ctx, o.targetURL, log)
	if err != nil {
		return fmt.Errorf("postgresql driver: %w", err)
	}
	defer pg.Close()
	reg := serve.NewRegistry()
	b, err := broker.New(ctx, broker.Config{
		Pool:             pool,
		Catalog:          catalog,
		Drivers:          map[string]broker.Driver{"postgresql": pg},
		Keys:             keys,
		Auth:             broker.Auth{Username: o.username, Password: o.password, Token: o.token},
		Logger:           log,
		Registry:         reg,
		OperationTimeout: o.operationTimeout,
		Workers:          o.workers,
	})
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return fmt.Errorf("start job engine: %w", err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := b.Stop(stopCtx); err != nil {
			log.Warn("stop job engine", "error", err)
		}
	}()
	log.Info("serving the OSB API", "addr", l.Addr().String())
	return serve.Run(ctx, l, b.Handler(), log)
}
