package pgserver

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EnsureDatabase creates the database name unless the server has it
// already, and returns the superuser's URL for it. Every role may connect
// to a new cluster's databases; Bindery's tenants (the built-in broker's
// binding roles) must not, so this database, postgres and template1 are
// closed to PUBLIC: only the superuser, and roles granted CONNECT, reach
// them.
func (s *Server) EnsureDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to the embedded PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	for _, db := range []string{name, "postgres", "template1"} {
		// Only when needed: the statement rewrites the database's row,
		// which every session of the cluster then has to take in.
		var open bool
		if err := conn.QueryRow(ctx, `SELECT has_database_privilege('public', $1, 'CONNECT') OR has_database_privilege('public', $1, 'TEMPORARY')`, db).Scan(&open); err != nil {
			return "", fmt.Errorf("look up database %s: %w", db, err)
		}
		if !open {
			continue
		}
		if _, err := conn.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+pgx.Identifier{db}.Sanitize()+" FROM PUBLIC"); err != nil {
			return "", fmt.Errorf("close database %s to PUBLIC: %w", db, err)
		}
	}
	return s.URL(name), nil
}
