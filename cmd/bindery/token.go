package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/cli/cmd/token"
	"github.com/bindery-dev/bindery/internal/pgserver"
	"github.com/bindery-dev/bindery/migrations"
)

// tokenDatabases is the database side of `bindery token` (cli/cmd/token):
// DATABASE_URL, or the data directory's embedded PostgreSQL — the one
// `bindery up` runs, or started for the command and stopped after it.
func tokenDatabases(e env) *token.Databases {
	return &token.Databases{
		DefaultDataDir: defaultDataDir,
		Open: func(ctx context.Context, db token.Database) (token.Store, error) {
			return openTokens(ctx, e, db)
		},
	}
}

func openTokens(ctx context.Context, e env, db token.Database) (token.Store, error) {
	log, err := e.logger("warn")
	if err != nil {
		return nil, err
	}
	o := dbOptions{url: db.URL, noMigrate: db.NoMigrate}
	s := &tokenStore{}
	if o.url == "" {
		dir, err := filepath.Abs(db.DataDir)
		if err != nil {
			return nil, err
		}
		if s.srv, o.url, err = embeddedDatabase(ctx, log, dir, pgserver.Use); err != nil {
			if errors.Is(err, pgserver.ErrNoCluster) {
				return nil, fmt.Errorf("%s holds no Bindery database (no PostgreSQL in %s): run `bindery up --data-dir %s` first, or give the right --data-dir, or DATABASE_URL",
					dir, filepath.Join(dir, "pg"), db.DataDir)
			}
			return nil, err
		}
	}
	if s.pool, err = o.open(ctx, log, migrations.Catalog); err != nil {
		_ = s.Close()
		return nil, err
	}
	// Tokens need no encryption key: only their hash is stored.
	s.store = catalog.NewStore(s.pool, nil, log)
	return s, nil
}

// tokenStore is token.Store over the catalog.
type tokenStore struct {
	srv   *pgserver.Server // nil with DATABASE_URL
	pool  *pgxpool.Pool
	store *catalog.Store
}

func (s *tokenStore) Create(ctx context.Context, req token.Request) (string, error) {
	tok, _, err := s.store.IssueToken(ctx, catalog.TokenRequest(req))
	return tok, tokenError(err)
}

func (s *tokenStore) List(ctx context.Context) ([]token.Record, error) {
	l, err := s.store.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]token.Record, len(l))
	for i, t := range l {
		out[i] = token.Record(*t)
	}
	return out, nil
}

func (s *tokenStore) Revoke(ctx context.Context, idOrName string) error {
	if err := tokenError(s.store.RevokeToken(ctx, idOrName)); err != nil {
		return fmt.Errorf("revoke %s: %w", idOrName, err)
	}
	return nil
}

// Close closes the pool and stops the server started for the command (an
// adopted one keeps running).
func (s *tokenStore) Close() error {
	if s.pool != nil {
		s.pool.Close()
	}
	if s.srv != nil {
		return s.srv.Stop()
	}
	return nil
}

// tokenError gives the catalog's errors the kinds the command line's exit
// codes follow.
func tokenError(err error) error {
	if _, ok := catalog.AsValidation(err); ok {
		return fmt.Errorf("%w: %w", token.ErrInvalid, err)
	}
	if errors.Is(err, catalog.ErrNotFound) {
		return token.ErrNotFound
	}
	return err
}

// embeddedDatabase gives the URL of Bindery's database in the data
// directory dir's embedded PostgreSQL (dir/pg), run by start: pgserver.Start
// for `bindery up`, which serves it for its life, or pgserver.Use for a
// command that needs it for a moment.
func embeddedDatabase(ctx context.Context, log *slog.Logger, dir string, start func(context.Context, string, pgserver.Options) (*pgserver.Server, error)) (*pgserver.Server, string, error) {
	pg := filepath.Join(dir, "pg")
	if _, err := os.Stat(filepath.Join(pg, "data", "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		log.Info("creating the embedded PostgreSQL (first start, a few seconds)", "dir", pg)
	} else {
		log.Info("starting the embedded PostgreSQL", "dir", pg)
	}
	srv, err := start(ctx, pg, pgserver.Options{})
	if err != nil {
		return nil, "", err
	}
	url, err := srv.EnsureDatabase(ctx, "bindery")
	if err != nil {
		_ = srv.Stop()
		return nil, "", err
	}
	return srv, url, nil
}
