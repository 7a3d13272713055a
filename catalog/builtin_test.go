package catalog_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestEnsureBrokerRepoints registers a broker, then ensures it again at
// another address, as `bindery up` does after a restart on a new port: the
// same broker follows, with the new address's catalogue.
func TestEnsureBrokerRepoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	first := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	second := osbtest.New(t, osbtest.WithBasicAuth("u2", "p2"))
	auth := func(u, p string) *catalog.BrokerAuth {
		return &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: u, Password: p}}
	}
	if err := catalog.EnsureBroker(ctx, s, "own", first.URL(), auth("u", "p")); err != nil {
		t.Fatal(err)
	}
	b1, err := s.GetBroker(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.EnsureBroker(ctx, s, "own", second.URL(), auth("u2", "p2")); err != nil {
		t.Fatalf("ensure at the new address, with the new credentials: %v", err)
	}
	b2, err := s.GetBroker(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	if b2.ID != b1.ID || b2.Spec.URL != second.URL() {
		t.Errorf("after the second ensure: id %s url %s; want id %s url %s", b2.ID, b2.Spec.URL, b1.ID, second.URL())
	}
	if b2.Status.ServicePlanCount == 0 {
		t.Errorf("the broker's catalogue was not fetched from the new address: %+v", b2.Status)
	}
}

// TestEnsureAdminToken keeps an admin token the catalog knows and replaces
// one it does not, or one of a lesser role.
func TestEnsureAdminToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	admin, err := catalog.EnsureAdminToken(ctx, s, "")
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := s.LookupToken(ctx, admin); err != nil || tok.Role != catalog.RoleAdmin || !tok.AllNamespaces() {
		t.Fatalf("new token %+v, %v; want an admin's over every namespace", tok, err)
	}
	if again, err := catalog.EnsureAdminToken(ctx, s, admin); err != nil || again != admin {
		t.Errorf("known admin token replaced: %v", err)
	}
	viewer, err := s.CreateToken(ctx, catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{viewer, "not-a-token"} {
		got, err := catalog.EnsureAdminToken(ctx, s, tok)
		if err != nil {
			t.Fatal(err)
		}
		if got == tok {
			t.Errorf("token %q kept as the admin's", tok)
		}
		if rt, err := s.LookupToken(ctx, got); err != nil || rt.Role != catalog.RoleAdmin {
			t.Errorf("replacement %+v, %v; want an admin's", rt, err)
		}
	}
}
