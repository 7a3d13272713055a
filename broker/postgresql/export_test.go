package postgresql

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueryString runs sql in database db as the driver connects there.
func (d *Driver) QueryString(ctx context.Context, db, sql string) (string, error) {
	conn, err := pgx.ConnectConfig(ctx, d.sessionConfig(db))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var s string
	err = conn.QueryRow(ctx, sql).Scan(&s)
	return s, err
}

// SessionSettings opens a session in database db as the driver opens its
// own there and reads the named settings.
func (d *Driver) SessionSettings(ctx context.Context, db string, names ...string) (map[string]string, error) {
	cfg := d.sessionConfig(db)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	out := map[string]string{}
	for _, n := range names {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", n).Scan(&v); err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, nil
}

// PoolSize is how many sessions the driver's pool may hold.
func (d *Driver) PoolSize() int32 { return d.pool.Config().MaxConns }
