package broker

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bindery-dev/bindery/internal/keyring"
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

// Reseal seals again with keys' first key every binding's credentials
// the broker sealed with an older one, then its canary, so that the older
// keys can be dropped from the list (keyring ResealStore). It returns how
// many values it sealed again.
func Reseal(ctx context.Context, pool *pgxpool.Pool, keys *keyring.Keyring) (int, error) {
	return keys.ResealStore(ctx, pool, keyring.Column{Table: "broker.key_canary", ID: "id", Sealed: "sealed", AAD: keyring.Fixed("broker")},
		keyring.Column{Table: "broker.bindings", ID: "id", Sealed: "credentials", AAD: keyring.Prefixed("")})
}
