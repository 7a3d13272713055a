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

// TestReseal: after a rotation, Reseal seals the bindings' credentials
// and the canary with the new key: the broker then starts with the new key
// alone and still returns a binding's credentials.
func TestReseal(t *testing.T) {
	t.Parallel()
	first := setup(t)
	id := randomID("inst")
	path := "/v2/service_instances/" + id
	first.expect(first.do("PUT", path, provisionBody(planSmall, nil)), 201)
	bpath := path + "/service_bindings/" + randomID("bind")
	creds := first.expect(first.do("PUT", bpath, bindBody()), 201).body["credentials"].(map[string]any)
	first.stop()

	newKey := keyring.Generate()
	rotated, err := keyring.Parse(newKey + "," + first.keys)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := broker.Reseal(context.Background(), first.pool, rotated); err != nil || n != 1 {
		t.Fatalf("re-sealed %d values (%v), want the binding's", n, err)
	}
	second := setup(t, func(o *options) { o.dbURL = first.dbURL; o.keys = newKey })
	got := second.expect(second.do("GET", bpath, nil), 200).body["credentials"].(map[string]any)
	if got["password"] != creds["password"] {
		t.Fatal("the binding's credentials changed")
	}
	second.expect(second.do("DELETE", bpath+q(planSmall), nil), 200)
	second.expect(second.do("DELETE", path+q(planSmall), nil), 200)
}
