package catalog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestBrokerConditions: a broker has the Ready condition alone, with
// Service Catalog v0.3.1's reasons and messages
// (pkg/controller/controller_clusterservicebroker.go): FetchedCatalog and
// its fixed message, or ErrorFetchingCatalog and the error; never Failed.
func TestBrokerConditions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	b := register(t, s, "fake", fake.URL(), "")
	check := func(status, reason, message string) {
		t.Helper()
		got, err := s.GetBroker(ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		conds := got.Status.Conditions
		if len(conds) != 1 || conds[0].Type != catalog.ConditionReady || conds[0].Status != status || conds[0].Reason != reason || !strings.HasPrefix(conds[0].Message, message) {
			t.Errorf("conditions %+v, want Ready %s %s %q…", conds, status, reason, message)
		}
	}
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	check(catalog.ConditionTrue, "FetchedCatalog", "Successfully fetched catalog entries from broker.")
	fake.Down()
	if _, err := s.Relist(ctx, b.ID); err == nil {
		t.Fatal("a relist of a broker that is down succeeded")
	}
	check(catalog.ConditionFalse, "ErrorFetchingCatalog", "Bindery could not fetch the catalogue of broker")
	fake.Up()
	if _, err := s.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	check(catalog.ConditionTrue, "FetchedCatalog", "Successfully fetched catalog entries from broker.")
	if !hasEvent(t, s, b.ID, "FetchedCatalog") {
		t.Error("the history has no fetch")
	}
}
