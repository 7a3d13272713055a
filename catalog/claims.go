package catalog

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Claims: cluster-wide locks on objects, so one engine replica at a time
// works on an object.

// Claimer takes cluster-wide locks on objects, so that one engine replica
// at a time works on an object. A claim holds a connection for as long as
// it lasts, so claims have their own small pool: they can never take the
// connections the work itself needs.
type Claimer struct {
	pool *pgxpool.Pool
}

// NewClaimer opens a pool of at most n connections for claims.
func (s *Store) NewClaimer(ctx context.Context, n int) (*Claimer, error) {
	cfg := s.pool.Config().Copy()
	cfg.MaxConns, cfg.MinConns = int32(n), 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Claimer{pool: pool}, nil
}

// Close closes the claims' pool; claims still held are released.
func (c *Claimer) Close() { c.pool.Close() }

// Claim takes the lock on key. ok is false when another process holds it;
// release gives it back.
func (c *Claimer) Claim(ctx context.Context, key string) (release func(), ok bool, err error) {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 7))`, key).Scan(&ok); err != nil {
		conn.Release()
		return nil, false, mapErr(err)
	}
	if !ok {
		conn.Release()
		return nil, false, nil
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock(hashtextextended($1, 7))`, key); err != nil {
			// A connection whose unlock failed is closed, which releases the lock.
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}, true, nil
}
