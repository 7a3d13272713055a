package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	osbclient "github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/pgfence"
	"github.com/bindery-dev/bindery/migrations"
)

// dbOptions are the flags of every command that uses the database.
type dbOptions struct {
	url       string
	noMigrate bool
}

func (o *dbOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "database-url", "", "PostgreSQL connection string (also DATABASE_URL)")
	fs.BoolVar(&o.noMigrate, "no-migrate", false, "do not apply pending migrations at start")
}

func (o *dbOptions) validate() []error {
	if o.url == "" {
		return []error{errors.New("--database-url (or DATABASE_URL) is required")}
	}
	return nil
}

// fenceSurveyInterval is how often a process whose database URL names
// several servers asks each where it stands, so that it leaves a former
// primary it still holds connections to (internal/pgfence).
const fenceSurveyInterval = 10 * time.Second

// open connects and, unless --no-migrate, applies the pending migrations of
// the schemas the command uses.
func (o *dbOptions) open(ctx context.Context, log *slog.Logger, schemas ...string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(o.url)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	if !strings.Contains(o.url, "pool_max_conns") {
		// pgx's default is the number of CPUs (4 at least): too few for a
		// server whose components share one pool. pool_max_conns in the URL
		// still wins.
		cfg.MaxConns = 25
	}
	// A primary a failover replaced is never used, even when it comes
	// back (internal/pgfence).
	fence := pgfence.New(log.With("component", "database"))
	fence.Install(&cfg.ConnConfig.Config)
	several := pgfence.Several(&cfg.ConnConfig.Config)
	if several {
		fence.Survey(ctx, &cfg.ConnConfig.Config)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	if several {
		go fence.Run(ctx, &cfg.ConnConfig.Config, fenceSurveyInterval, pool.Reset)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the database at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if !o.noMigrate {
		for _, s := range schemas {
			err := migrations.Up(ctx, pool, s)
			if errors.Is(err, migrations.ErrSchemaNewer) {
				// A newer release migrated it: this one serves on it
				// during the rolling update (expand, then contract).
				log.WarnContext(ctx, "the database was migrated by a newer release; serving on it unchanged", "reason", err.Error())
				continue
			}
			if err != nil {
				pool.Close()
				return nil, err
			}
			log.DebugContext(ctx, "migrations applied", "schema", s)
		}
	}
	return pool, nil
}

// keyOptions is the flag of the components that seal secrets at rest; in
// `bindery up` they share one.
type keyOptions struct {
	encryptionKey string
	// source is where the keys came from (the flag, its variable, a
	// file), which the errors about them name.
	source string
}

// addFlags registers --encryption-key; what describes what the keys seal.
func (o *keyOptions) addFlags(fs *flag.FlagSet, what string) {
	fs.StringVar(&o.encryptionKey, "encryption-key", "", "comma-separated base64 32-byte keys sealing "+what+" at rest; the first encrypts")
}

// complete records where the parsed flag's keys came from.
func (o *keyOptions) complete(fs *flag.FlagSet) { o.source = flagSource(fs, "encryption-key") }

func (o *keyOptions) keyring() (*keyring.Keyring, error) {
	return keyring.ParseFrom(o.source, o.encryptionKey)
}

// server is what every server command has: the database, the encryption
// keys (when the component seals secrets) and the log level.
type server struct {
	db    dbOptions
	keys  keyOptions
	level string
}

// start parses a server command's flags — the database's, the keys' (when
// keysSeal names what they seal), the component's (addFlags) and
// --log-level — checks them all together (check gets the database options
// to derive from them), and opens the database with the given schemas
// migrated. keys is nil when the command has no --encryption-key.
func (s *server) start(ctx context.Context, e env, name string, args []string, keysSeal string, addFlags func(*flag.FlagSet), check func(*dbOptions) error, schemas ...string) (log *slog.Logger, pool *pgxpool.Pool, keys *keyring.Keyring, err error) {
	fs := newFlagSet(e, name)
	s.db.addFlags(fs)
	if keysSeal != "" {
		s.keys.addFlags(fs, keysSeal)
	}
	addFlags(fs)
	fs.StringVar(&s.level, "log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, nil, err
	}
	s.keys.complete(fs)
	errs := s.db.validate()
	if keysSeal != "" {
		if keys, err = s.keys.keyring(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(append(errs, check(&s.db))...); err != nil {
		return nil, nil, nil, err
	}
	if log, err = e.logger(s.level); err != nil {
		return nil, nil, nil, err
	}
	if pool, err = s.db.open(ctx, log, schemas...); err != nil {
		return nil, nil, nil, err
	}
	return log, pool, keys, nil
}

// newStore is the catalog's store over pool; keys may be nil where no
// secret is read or written.
func newStore(pool *pgxpool.Pool, keys *keyring.Keyring, log *slog.Logger, opts ...catalog.Option) *catalog.Store {
	return catalog.NewStore(pool, keys, log.With("component", "catalog"), opts...)
}

// brokerCalls are the flags of the processes that call brokers (the
// catalog server, the engine, `bindery up`): how long a catalogue fetch may
// take and where brokers may be.
type brokerCalls struct {
	timeout       time.Duration
	allow, deny   string
	allowLoopback bool
}

// addFlags registers the flags; loopback says whether brokers on this
// machine are allowed by default (`bindery up` runs its own there).
func (o *brokerCalls) addFlags(fs *flag.FlagSet, loopback bool) {
	fs.DurationVar(&o.timeout, "broker-timeout", catalog.DefaultBrokerTimeout, "how long fetching a broker's catalogue may take (registration answers within it)")
	fs.StringVar(&o.allow, "broker-egress-allow", "", "comma-separated CIDRs brokers may be in (empty: anywhere not denied)")
	fs.StringVar(&o.deny, "broker-egress-deny", "", "comma-separated CIDRs brokers may not be in (link-local and cloud metadata addresses are always denied)")
	fs.BoolVar(&o.allowLoopback, "broker-allow-loopback", loopback, "allow brokers on this machine: its loopback addresses and those of its own interfaces")
}

// storeOptions checks the flags and gives the store's options for them.
func (o *brokerCalls) storeOptions() ([]catalog.Option, error) {
	var errs []error
	if o.timeout <= 0 {
		errs = append(errs, errors.New("--broker-timeout: must be positive"))
	}
	allow, err := osbclient.ParsePrefixes("--broker-egress-allow", strings.Split(o.allow, ","))
	errs = append(errs, err)
	deny, err := osbclient.ParsePrefixes("--broker-egress-deny", strings.Split(o.deny, ","))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return []catalog.Option{
		catalog.WithBrokerTimeout(o.timeout),
		catalog.WithBrokerEgress(&osbclient.Egress{Allow: allow, Deny: deny, AllowLoopback: o.allowLoopback}),
	}, nil
}

// storeLimits are the bounds of the processes whose stores serve the
// doors: --snapshot-limit, for those that read long lists from one
// snapshot (the REST API's exports and the Kubernetes API's lists read in
// chunks), and --max-brokers-per-namespace, for those where brokers are
// registered.
type storeLimits struct {
	snapshot   time.Duration
	maxBrokers int
}

func (o *storeLimits) addFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.snapshot, "snapshot-limit", catalog.DefaultSnapshotLimit,
		"how long an export or a list read in chunks may hold its database snapshot, which holds back vacuum; a reader slower than that is cut off")
	fs.IntVar(&o.maxBrokers, catalog.MaxBrokersFlag, catalog.DefaultMaxBrokersPerNamespace,
		"the most brokers of its own a namespace may have registered (ServiceBrokers, and brokers of a namespace through the REST API); one more is refused as a quota is; the cluster's brokers are not bounded (0: no bound)")
}

// storeOptions checks the flags and gives the store's options for them.
func (o *storeLimits) storeOptions() ([]catalog.Option, error) {
	var errs []error
	if o.snapshot <= 0 {
		errs = append(errs, errors.New("--snapshot-limit: must be positive"))
	}
	if o.maxBrokers < 0 {
		errs = append(errs, errors.New("--"+catalog.MaxBrokersFlag+": must not be negative (0: no bound)"))
	}
	return []catalog.Option{catalog.WithSnapshotLimit(o.snapshot), catalog.WithMaxBrokersPerNamespace(o.maxBrokers)}, errors.Join(errs...)
}

// openStore is newStore for the processes that seal or open the catalog's
// secrets: it refuses keys that are not the ones the catalog was sealed
// with (keyring VerifyCanary), before anything is written with them.
func openStore(ctx context.Context, pool *pgxpool.Pool, keys *keyring.Keyring, log *slog.Logger, opts ...catalog.Option) (*catalog.Store, error) {
	store := newStore(pool, keys, log, opts...)
	if err := store.CheckKeys(ctx); err != nil {
		return nil, err
	}
	return store, nil
}
