package catalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestRelistStoreFailureRecorded: a catalogue the database refuses to
// store, for a reason that is neither a problem of the catalogue nor a
// conflict (here a trigger raises an error, as an integer out of range or
// a full disk would), fails the relist the way every other failure does:
// the broker's Ready condition and a Warning event say why, the failure is
// counted, the next attempt waits for its backoff, and the relist's claim
// is let go of. Before, the error was returned and nothing recorded: the
// broker kept saying its last fetch succeeded, and the claim stayed until
// it ran out, when the relister tried again at once.
func TestRelistStoreFailureRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool, fake, b := listedWithPool(t)
	for _, sql := range []string{
		`CREATE FUNCTION catalog.refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'the disk is full' USING ERRCODE = '53100'; END $$`,
		`CREATE TRIGGER refuse_boom BEFORE INSERT ON catalog.service_classes FOR EACH ROW
			WHEN (NEW.external_name = 'boom') EXECUTE FUNCTION catalog.refuse_boom()`,
		// As the scheduled relister leaves it while it fetches.
		`UPDATE catalog.brokers SET relist_claimed_until = now() + interval '2 minutes'`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	cat := fake.Catalog()
	cat = append(cat, osbtest.Service{ID: "0d5b5c4e-0000-4000-8000-00000000b00e", Name: "boom", Description: "Refused by the database.",
		Plans: []osbtest.Plan{{ID: "0d5b5c4e-0000-4000-8000-00000000b00f", Name: "p", Description: "A plan."}}})
	fake.SetCatalog(cat)
	before := time.Now()
	if _, err := s.Relist(ctx, b.ID); err == nil {
		t.Fatal("a catalogue the database refused was stored")
	}
	got, err := s.GetBroker(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := ready(got); c.Status != catalog.ConditionFalse || c.Reason != catalog.ReasonErrorSyncingCatalog || !strings.Contains(c.Message, "the disk is full") {
		t.Errorf("Ready after a catalogue that could not be stored: %+v", c)
	}
	// The first backoff is 5 s at most; the relist interval, 15 minutes.
	if next := got.Status.NextRelistTime; next == nil || !next.After(before) || next.After(before.Add(time.Minute)) {
		t.Errorf("next relist %v, want one after the first backoff", next)
	}
	events, err := s.Events(ctx, b.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := events[len(events)-1]; e.Type != "Warning" || e.Reason != catalog.ReasonErrorSyncingCatalog {
		t.Errorf("the last event is %s %s, want a Warning %s", e.Type, e.Reason, catalog.ReasonErrorSyncingCatalog)
	}
	counts, err := s.RelistCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].Failed != 1 {
		t.Errorf("counts %+v, want one failed fetch", counts)
	}
	var claimed bool
	if err := pool.QueryRow(ctx, `SELECT relist_claimed_until IS NOT NULL FROM catalog.brokers`).Scan(&claimed); err != nil || claimed {
		t.Errorf("the relist's claim is still held (%v)", err)
	}
}
