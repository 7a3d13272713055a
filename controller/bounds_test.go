package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// TestHostileBrokerTextBounded is the attack that grew a database from 52
// to 663 MB in 75 s: a broker answering every provision with 500 and a
// description that changes every time, here of 60 KiB with a NUL (under
// the bound answers are read to, so it is read, cut and stored) or of
// 1 MiB (past it, so it is not read at all). The instance keeps being
// retried, and each stored status, history entry and change-feed document
// of it stays within its bounds, as does each line of the engine's log.
func TestHostileBrokerTextBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	var n atomic.Int64
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Status: 500, Code: "Hostile", Describe: func() string {
		i := n.Add(1)
		if i%2 == 1 {
			return fmt.Sprintf("failure %d \x00", i) + strings.Repeat("x", 60<<10)
		}
		return fmt.Sprintf("failure %d ", i) + strings.Repeat("y", 1<<20)
	}})
	in := e.createInstance("victim", osbtest.DefaultService, osbtest.PlanSync, nil)
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		if c := fake.Count(osbtest.VerbProvision); c < 4 {
			return fmt.Errorf("%d provisions", c)
		}
		return nil
	})
	got := e.waitInstance(in.ID, "marked with the broker's cut words", func(in *catalog.Instance) bool {
		return strings.Contains(in.Status.LastError, "failure") || strings.Contains(in.Status.LastError, "larger than")
	})
	for _, c := range got.Status.Conditions {
		if len(c.Message) > catalog.MaxMessage || pgtext.Problem(c.Message) != "" {
			t.Errorf("condition %s: a message of %d bytes", c.Type, len(c.Message))
		}
	}
	ctx := context.Background()
	var statusBytes, feedBytes, historyBytes, historyRows int
	if err := e.pool.QueryRow(ctx, `SELECT
			(SELECT octet_length(status::text) FROM catalog.instances WHERE id = $1),
			(SELECT max(octet_length(object::text)) FROM catalog.changes WHERE object_id = $1),
			(SELECT max(octet_length(message)) FROM catalog.events WHERE object_id = $1),
			(SELECT count(*) FROM catalog.events WHERE object_id = $1)`, in.ID).Scan(&statusBytes, &feedBytes, &historyBytes, &historyRows); err != nil {
		t.Fatal(err)
	}
	t.Logf("status %d B, largest feed document %d B, largest history message %d B in %d entries", statusBytes, feedBytes, historyBytes, historyRows)
	if statusBytes > 8<<10 || feedBytes > 12<<10 || historyBytes > catalog.MaxMessage {
		t.Errorf("status %d bytes (want ≤ 8 KiB), feed document %d (≤ 12 KiB), history message %d (≤ %d)",
			statusBytes, feedBytes, historyBytes, catalog.MaxMessage)
	}
	for line := range strings.Lines(e.logs.String()) {
		if len(line) > 8<<10 {
			t.Errorf("a log line of %d bytes: %.200s", len(line), line)
			break
		}
	}
}
