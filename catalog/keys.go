package catalog

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/internal/keyring"
)

// CheckKeys verifies that the store's encryption keys are the ones the
// catalog's sealed values were sealed with, through the canary kept in the
// database (internal/keyring VerifyCanary). A process must not start when it
// fails: it would mix values sealed with two keys.
func (s *Store) CheckKeys(ctx context.Context) error {
	keys, err := s.keyring()
	if err != nil {
		return err
	}
	return keys.VerifyCanary(ctx, "catalog", canaryStore{s})
}

type canaryStore struct{ s *Store }

func (c canaryStore) LoadCanary(ctx context.Context) ([]byte, error) {
	var sealed []byte
	err := c.s.pool.QueryRow(ctx, `SELECT sealed FROM catalog.key_canary WHERE id = 1`).Scan(&sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return sealed, err
}

func (c canaryStore) StoreCanary(ctx context.Context, sealed []byte) error {
	_, err := c.s.pool.Exec(ctx, `INSERT INTO catalog.key_canary (id, sealed) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, sealed)
	return err
}

func (c canaryStore) SampleSealed(ctx context.Context) ([]byte, []byte, error) {
	var id string
	var sealed []byte
	err := c.s.pool.QueryRow(ctx, `SELECT binding_id::text, sealed FROM catalog.binding_credentials LIMIT 1`).Scan(&id, &sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	return sealed, []byte("binding:" + id), err
}

// Reseal seals again with the first encryption key every value of the
// catalog sealed with an older one (brokers' and bindings' credentials),
// then its canary, so that the older keys can be dropped from the list
// (keyring ResealStore). It returns how many values it sealed again.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	keys, err := s.keyring()
	if err != nil {
		return 0, err
	}
	return keys.ResealStore(ctx, s.pool, keyring.Column{Table: "catalog.key_canary", ID: "id", Sealed: "sealed", AAD: keyring.Fixed("catalog")},
		keyring.Column{Table: "catalog.brokers", ID: "id", Sealed: "auth", AAD: keyring.Prefixed("broker:")},
		keyring.Column{Table: "catalog.binding_credentials", ID: "binding_id", Sealed: "sealed", AAD: keyring.Prefixed("binding:")})
}
