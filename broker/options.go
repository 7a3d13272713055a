package broker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/serve"
)

// Options are the broker's command-line settings. The database and the
// encryption keys, which every component shares, are not among them: the
// command that runs the broker owns those flags and hands Config the pool
// and keys.
type Options struct {
	// Listen is HOST:PORT to serve the OSB API on.
	Listen string
	// listenFlag is the flag that set Listen ("" when no flag did),
	// which Validate names.
	listenFlag string
	Username   string
	Password   string
	Token      string
	// CatalogFile is a YAML catalogue; empty: the embedded one.
	CatalogFile string
	// TargetURL is the PostgreSQL cluster where instances are created.
	TargetURL string
	// TargetReserved is how many of the target cluster's connection slots
	// the plans' connection limits must leave to Bindery.
	TargetReserved    int
	OperationTimeout  time.Duration
	OperationDeadline time.Duration
	Workers           int
	// ShutdownGrace is how long running operations may go on after the
	// broker is told to stop; then they are cancelled, to be resumed by
	// the next broker process.
	ShutdownGrace time.Duration
	// OperationRetention is how long finished operations are kept.
	OperationRetention time.Duration
}

// AddFlags registers the broker's flags; listenFlag names the listen
// address's flag (it differs when several components share a command).
func (o *Options) AddFlags(fs *flag.FlagSet, listenFlag, listenDefault string) {
	fs.StringVar(&o.Listen, listenFlag, listenDefault, "HOST:PORT to serve the OSB API on")
	o.listenFlag = "--" + listenFlag
	fs.StringVar(&o.Username, "broker-username", "", "HTTP basic auth username platforms must present")
	fs.StringVar(&o.Password, "broker-password", "", "HTTP basic auth password platforms must present")
	fs.StringVar(&o.Token, "broker-token", "", "bearer token platforms may present instead of basic auth")
	fs.StringVar(&o.CatalogFile, "catalog", "", "YAML catalogue file (default: the embedded PostgreSQL catalogue)")
	fs.StringVar(&o.TargetURL, "target-database-url", "", "PostgreSQL cluster where instances are created (default: the cluster of --database-url)")
	fs.IntVar(&o.TargetReserved, "target-reserved-connections", DefaultTargetReserved, "connection slots of the target cluster kept for Bindery's own sessions: the plans' connection limits together get max_connections less these and the superusers' reserved slots (0: none kept)")
	fs.DurationVar(&o.OperationTimeout, "operation-timeout", 5*time.Minute, "longest one attempt of an operation may run; a crashed operation resumes after it")
	fs.DurationVar(&o.OperationDeadline, "operation-deadline", DefaultOperationDeadline, "longest an operation may take over all its attempts before it ends as failed (a plan's maximum_polling_duration shortens it)")
	fs.DurationVar(&o.OperationRetention, "operation-retention", DefaultOperationRetention, "how long finished operations are kept for last_operation (the newest of a live instance or binding longer, and at most 16 of each)")
	fs.IntVar(&o.Workers, "workers", 10, "operations run at once by this process")
	fs.DurationVar(&o.ShutdownGrace, "shutdown-grace", DefaultShutdownGrace, "how long running operations may go on when the broker stops; then they are cancelled and resumed by the next broker process (0: cancelled at once)")
}

// DefaultTargetReserved is --target-reserved-connections' default: room
// for Bindery's shared pool (25 in `bindery up`), the engine's claims (one
// per worker, 8), the driver's pool (postgresql.DefaultPoolSize, 6) and one
// more session per driver operation in flight (6), and a few listeners.
const DefaultTargetReserved = 50

// HasCredentials reports whether any way for platforms to authenticate
// is set.
func (o *Options) HasCredentials() bool {
	return o.Username != "" || o.Password != "" || o.Token != ""
}

// Complete fills what the flags leave to be derived: instances go to the
// catalog's own cluster unless --target-database-url names another.
func (o *Options) Complete(databaseURL string) {
	if o.TargetURL == "" {
		o.TargetURL = databaseURL
	}
}

// Validate reports every problem with the options together.
func (o *Options) Validate() error {
	var errs []error
	if o.listenFlag != "" {
		errs = append(errs, serve.CheckListen(o.listenFlag, o.Listen))
	}
	if !o.HasCredentials() {
		errs = append(errs, errors.New("no broker credentials: set --broker-username and --broker-password (BINDERY_BROKER_USERNAME, BINDERY_BROKER_PASSWORD) or --broker-token"))
	} else if (o.Username == "") != (o.Password == "") {
		errs = append(errs, errors.New("--broker-username and --broker-password go together"))
	}
	if o.OperationTimeout <= 0 {
		errs = append(errs, errors.New("--operation-timeout: must be positive"))
	}
	if o.TargetReserved < 0 {
		errs = append(errs, errors.New("--target-reserved-connections: must not be negative"))
	}
	if o.OperationDeadline < o.OperationTimeout {
		errs = append(errs, errors.New("--operation-deadline: must be at least --operation-timeout"))
	}
	if o.OperationRetention < o.OperationDeadline {
		errs = append(errs, errors.New("--operation-retention: must be at least --operation-deadline"))
	}
	if o.ShutdownGrace < 0 {
		errs = append(errs, errors.New("--shutdown-grace: must not be negative"))
	}
	if o.Workers <= 0 {
		errs = append(errs, errors.New("--workers: must be positive"))
	}
	return errors.Join(errs...)
}

// Config loads the catalogue and returns the broker's Config, with its own
// metrics registry and no drivers: the caller adds those, which live in
// packages that import this one.
func (o *Options) Config(pool *pgxpool.Pool, keys *keyring.Keyring, log *slog.Logger) (Config, error) {
	catalog, err := LoadCatalog(o.CatalogFile)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Pool:               pool,
		Catalog:            catalog,
		Drivers:            map[string]Driver{},
		Keys:               keys,
		Auth:               Auth{Username: o.Username, Password: o.Password, Token: o.Token},
		Logger:             log,
		Registry:           serve.NewRegistry(),
		OperationTimeout:   o.OperationTimeout,
		OperationDeadline:  o.OperationDeadline,
		Workers:            o.Workers,
		ShutdownGrace:      o.ShutdownGrace,
		OperationRetention: o.OperationRetention,
	}, nil
}

// DefaultShutdownGrace is --shutdown-grace's default: how long running
// operations may go on after a shutdown begins before they are cancelled
// (they stay in progress, and the next broker process resumes them); short
// enough for the process to exit within its grace period
// (docs/operations.md).
const DefaultShutdownGrace = 3 * time.Second

// Run starts a broker's job engine and serves its API on l until ctx ends,
// then stops the engine while the server drains, giving running
// operations cfg.ShutdownGrace.
func Run(ctx context.Context, cfg Config, l net.Listener) error {
	b, err := New(ctx, cfg)
	if err != nil {
		_ = l.Close()
		return err
	}
	if err := b.Start(ctx); err != nil {
		_ = l.Close()
		return fmt.Errorf("start job engine: %w", err)
	}
	// The engine stops when the server does, for whatever reason.
	serving, stopServing := context.WithCancel(ctx)
	defer stopServing()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-serving.Done()
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.shutdownGrace)
		defer cancel()
		if err := b.Stop(stopCtx); err != nil {
			b.log.Warn("stop job engine", "error", err)
		}
	}()
	b.log.Info("serving the OSB API", "addr", l.Addr().String())
	err = serve.Run(ctx, l, b.Handler(), b.log)
	stopServing()
	<-stopped
	return err
}
