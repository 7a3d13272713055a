package broker

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// canaryStore keeps the broker schema's encryption-key canary
// (internal/keyring VerifyCanary): New refuses keys that cannot open the
// credentials the broker sealed before.
type canaryStore struct{ pool *pgxpool.Pool }

func (c canaryStore) LoadCanary(ctx context.Context) ([]byte, error) {
	var sealed []byte
	err := c.pool.QueryRow(ctx, `SELECT sealed FROM broker.key_canary WHERE id = 1`).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return sealed, err
}

func (c canaryStore) StoreCanary(ctx context.Context, sealed []byte) error {
	_, err := c.pool.Exec(ctx, `INSERT INTO broker.key_canary (id, sealed) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, sealed)
	return err
}

func (c canaryStore) SampleSealed(ctx context.Context) ([]byte, []byte, error) {
	var id string
	var sealed []byte
	err := c.pool.QueryRow(ctx, `SELECT id, credentials FROM broker.bindings WHERE credentials IS NOT NULL LIMIT 1`).Scan(&id, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	return sealed, []byte(id), err
}
