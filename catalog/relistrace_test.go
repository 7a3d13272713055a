package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestRelistDropRacesHolders: a relist deletes a plan the broker no longer
// offers when nothing holds it, yet something may take hold of it while
// the relist waits for the plan's row: an instance created, a visibility
// set, each committed while the relist waited. The plan is then kept,
// marked removed, and the relist succeeds.
func TestRelistDropRacesHolders(t *testing.T) {
	t.Parallel()
	holders := map[string]func(ctx context.Context, tx pgx.Tx, planID, classID string) error{
		"an instance created": func(ctx context.Context, tx pgx.Tx, planID, classID string) error {
			_, err := tx.Exec(ctx, `INSERT INTO catalog.instances (id, namespace, name, class_id, plan_id, spec, resource_version)
				VALUES ($1, 'default', 'racer', $2, $3, jsonb_build_object('externalID', $4::text), 1)`, uuid.NewString(), classID, planID, uuid.NewString())
			return err
		},
		"a visibility set": func(ctx context.Context, tx pgx.Tx, planID, _ string) error {
			_, err := tx.Exec(ctx, `UPDATE catalog.service_plans SET metadata = jsonb_set(metadata, '{annotations}', jsonb_build_object($2::text, 'team-a'))
				WHERE id = $1`, planID, catalog.VisibleInAnnotation)
			return err
		},
	}
	for name, hold := range holders {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, pool, fake, b := listedWithPool(t)
			full := fake.Catalog()
			var planID, classID string
			if err := pool.QueryRow(ctx, `SELECT id::text, class_id::text FROM catalog.service_plans WHERE external_id = $1`, full[0].Plans[1].ID).Scan(&planID, &classID); err != nil {
				t.Fatal(err)
			}
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := hold(ctx, tx, planID, classID); err != nil {
				t.Fatal(err)
			}
			trimmed := []osbtest.Service{full[0]}
			trimmed[0].Plans = []osbtest.Plan{full[0].Plans[0], full[0].Plans[2], full[0].Plans[3]}
			fake.SetCatalog(trimmed)
			done := make(chan error, 1)
			go func() {
				_, err := s.Relist(ctx, b.ID)
				done <- err
			}()
			waitForLockOn(t, pool, "catalog.service_plans")
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("the relist: %v", err)
			}
			p, err := s.GetPlan(ctx, planID)
			if err != nil || !p.Status.RemovedFromBrokerCatalog {
				t.Fatalf("the plan held while the relist waited: %+v, %v; want it kept, marked removed", p, err)
			}
		})
	}
}

// waitForLockOn waits until a statement on table, in the database of
// pool, waits for a lock.
func waitForLockOn(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, table string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement waited for a lock on %s", table)
		}
	}
}
