package broker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/internal/keyring"
)

// TestWrongKeysRefused: a broker started on a database with a wrong but
// valid key refuses to start (it would seal new credentials with a key that
// cannot open the old ones); the rotated list (new key first, old kept)
// starts.
func TestWrongKeysRefused(t *testing.T) {
	t.Parallel()
	first := setup(t)
	cat, err := broker.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	other := keyring.Generate()
	for _, tc := range []struct {
		keys string
		ok   bool
	}{
		{other, false},
		{other + "," + first.keys, true},
	} {
		keys, err := keyring.Parse(tc.keys)
		if err != nil {
			t.Fatal(err)
		}
		_, err = broker.New(context.Background(), broker.Config{Pool: first.pool, Catalog: cat,
			Drivers: map[string]broker.Driver{"postgresql": nil}, Keys: keys, Auth: broker.Auth{Username: user, Password: pass}})
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, keyring.ErrWrongKeys)) {
			t.Errorf("keys %d: %v, want ok=%v", len(tc.keys), err, tc.ok)
		}
	}
}
