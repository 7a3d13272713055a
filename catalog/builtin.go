package catalog

import (
	"context"
	"errors"
)

// EnsureBroker registers the broker name at url with auth, or, when the
// catalog has it already, points it at url with auth again; then it
// fetches the broker's catalogue. `bindery up` keeps its own broker
// registered this way across restarts, whatever port it got.
func EnsureBroker(ctx context.Context, store *Store, name, url string, auth *BrokerAuth) error {
	b, err := store.GetBroker(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		b = &Broker{Spec: BrokerSpec{URL: url}}
		b.Name = name
		if b, err = store.CreateBroker(ctx, b, auth); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if b, err = store.UpdateBroker(ctx, b.ID, 0, func(b *Broker) (*BrokerAuth, error) {
			b.Spec.URL = url
			return auth, nil
		}); err != nil {
			return err
		}
	}
	_, err = store.Relist(ctx, b.ID)
	return err
}

// EnsureAdminToken returns token if the catalog knows it as an admin's
// over every namespace, or else a new admin token.
func EnsureAdminToken(ctx context.Context, store *Store, token string) (string, error) {
	if token != "" {
		if t, err := store.LookupToken(ctx, token); err == nil && t.Role == RoleAdmin && t.AllNamespaces() {
			return token, nil
		}
	}
	return store.CreateToken(ctx, RoleAdmin)
}
