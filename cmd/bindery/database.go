package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

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
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the database at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if !o.noMigrate {
		for _, s := range schemas {
			if err := migrations.Up(ctx, pool, s); err != nil {
				pool.Close()
				return nil, err
			}
			log.DebugContext(ctx, "migrations applied", "schema", s)
		}
	}
	return pool, nil
}

// startServer parses a server command's flags — the database's, the
// component's (addFlags) and --log-level — checks them all together (the
// database's and check's problems in one error), and opens the database
// with the given schemas migrated.
func startServer(ctx context.Context, e env, name string, args []string, addFlags func(*flag.FlagSet), check func(*dbOptions) []error, schemas ...string) (*slog.Logger, *pgxpool.Pool, error) {
	fs := newFlagSet(e, name)
	var db dbOptions
	db.addFlags(fs)
	addFlags(fs)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if err := errors.Join(append(db.validate(), check(&db)...)...); err != nil {
		return nil, nil, err
	}
	log, err := e.logger(*level)
	if err != nil {
		return nil, nil, err
	}
	pool, err := db.open(ctx, log, schemas...)
	if err != nil {
		return nil, nil, err
	}
	return log, pool, nil
}
