package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/migrations"
)

// cluster is the PostgreSQL the benchmark runs against.
type cluster struct {
	// adminURL reaches the cluster as a superuser.
	adminURL string
	// about says which server it is, for the report.
	about string
	stop  func() error
}

// startCluster uses DATABASE_URL when it is set, and otherwise starts a
// private server with fsync off in a temporary directory.
func startCluster(ctx context.Context) (*cluster, error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return &cluster{adminURL: u, about: "from DATABASE_URL", stop: func() error { return nil }}, nil
	}
	dir, err := os.MkdirTemp("", "osbbench-")
	if err != nil {
		return nil, fmt.Errorf("private postgresql: %w", err)
	}
	// PostgreSQL may run as another user (as postgres when we are root),
	// which must be able to enter the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("private postgresql: %w", err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	srv, err := pgserver.Start(startCtx, dir, pgserver.Options{Fast: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("private postgresql: %w", err)
	}
	stop := func() error {
		err := srv.Stop()
		return errors.Join(err, os.RemoveAll(dir))
	}
	return &cluster{adminURL: srv.URL("postgres"), about: "private server, fsync off", stop: stop}, nil
}

// createDatabase creates an empty database for the benchmark and returns
// its URL and a function that drops it.
func (c *cluster) createDatabase(ctx context.Context, name string) (string, func(context.Context) error, error) {
	u, err := url.Parse(c.adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, errors.New("database url: must be a postgres:// url")
	}
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, c.adminURL)
		if err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// bindery is Bindery's broker, built as `bindery serve broker` builds it,
// with its logs discarded.
type bindery struct {
	broker  *broker.Broker
	catalog *broker.Catalog
	driver  *postgresql.Driver
}

// startBindery migrates the broker's schema in pool's database, creates
// the broker with the default catalogue and the PostgreSQL driver on
// targetURL, and starts its job engine.
func startBindery(ctx context.Context, pool *pgxpool.Pool, targetURL, username, password string) (*bindery, error) {
	log := slog.New(slog.DiscardHandler)
	if err := migrations.Up(ctx, pool, migrations.Broker); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	catalog, err := broker.DefaultCatalog()
	if err != nil {
		return nil, fmt.Errorf("default catalog: %w", err)
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	pg, err := postgresql.New(ctx, targetURL, log)
	if err != nil {
		return nil, fmt.Errorf("postgresql driver: %w", err)
	}
	b, err := broker.New(ctx, broker.Config{
		Pool:     pool,
		Catalog:  catalog,
		Drivers:  map[string]broker.Driver{"postgresql": pg},
		Keys:     keys,
		Auth:     broker.Auth{Username: username, Password: password},
		Logger:   log,
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		pg.Close()
		return nil, fmt.Errorf("broker: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		pg.Close()
		return nil, fmt.Errorf("start job engine: %w", err)
	}
	return &bindery{broker: b, catalog: catalog, driver: pg}, nil
}

// stop stops the job engine and closes the driver.
func (b *bindery) stop(ctx context.Context) error {
	err := b.broker.Stop(ctx)
	b.driver.Close()
	if err != nil {
		return fmt.Errorf("stop job engine: %w", err)
	}
	return nil
}

// smallPlan finds the default catalogue's "small" plan.
func (b *bindery) smallPlan() (serviceID, planID string, cfg postgresql.PlanConfig, err error) {
	if len(b.catalog.Services) == 0 {
		return "", "", cfg, errors.New("the catalog has no services")
	}
	s := b.catalog.Services[0]
	for _, p := range s.Plans {
		if p.Name == "small" {
			cfg, err := postgresql.ParsePlanConfig(p.Config)
			if err != nil {
				return "", "", cfg, fmt.Errorf("plan %q: %w", p.Name, err)
			}
			return s.ID, p.ID, cfg, nil
		}
	}
	return "", "", cfg, fmt.Errorf("service %q has no plan named small", s.Name)
}
