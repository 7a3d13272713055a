package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/broker"
)

// hanging makes every provision and bind attempt run until its context
// ends, as a target cluster that stopped answering would.
func hanging(o *options) {
	o.wrap = func(d broker.Driver) broker.Driver { return newGate(d) }
	o.timeout = 300 * time.Millisecond
}

// TestOperationGivenUp: an asynchronous operation whose attempts keep
// timing out ends as failed, with the reason, on its job's last attempt
// and when it outlives the operation deadline, rather than staying "in
// progress" for ever; the failed records can then be removed.
func TestOperationGivenUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts func(*options)
		says string
	}{
		{"last attempt", func(o *options) { hanging(o); o.maxAttempts = 2 }, "the broker gave up after 2 attempts"},
		{"deadline", func(o *options) { hanging(o); o.deadline = 1500 * time.Millisecond }, "it did not finish within 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.opts)
			id := randomID("giveup")
			path := "/v2/service_instances/" + id
			start := time.Now()
			op := b.expect(b.do("PUT", path+"?accepts_incomplete=true", provisionBody(planSmall, nil)), 202).str("operation")
			lo := b.waitFor(path, op)
			if lo.str("state") != "failed" {
				t.Fatalf("last_operation %d %s, want state failed", lo.status, lo.raw)
			}
			desc := lo.str("description")
			for _, want := range []string{"Provisioning failed: " + tc.says, "the last attempt was cut off after 300ms"} {
				if !strings.Contains(desc, want) {
					t.Errorf("description %q does not say %q", desc, want)
				}
			}
			t.Logf("failed after %s: %s", time.Since(start).Round(10*time.Millisecond), desc)
			b.expect(b.do("PUT", path, provisionBody(planSmall, nil)), 409)
			b.expect(b.do("DELETE", path+q(planSmall), nil), 200)
			b.expect(b.do("DELETE", path+q(planSmall), nil), 410)
		})
	}
}

// TestStrandedOperationSettled: an operation in progress whose job is gone
// (River discarded it, or someone removed it) is reported failed rather
// than in progress for ever.
func TestStrandedOperationSettled(t *testing.T) {
	t.Parallel()
	g := newGate(nil)
	b := setup(t, func(o *options) {
		o.wrap = func(d broker.Driver) broker.Driver { g.Driver = d; return g }
		o.timeout = 2 * time.Second
	})
	id := randomID("stranded")
	path := "/v2/service_instances/" + id
	op := b.expect(b.do("PUT", path+"?accepts_incomplete=true", provisionBody(planSmall, nil)), 202).str("operation")
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = b.broker.Stop(ctx)
	b.stopped = true
	if lo := b.do("GET", path+"/last_operation?operation="+op, nil); lo.str("state") != "in progress" {
		t.Fatalf("with its job still queued: %s", lo.raw)
	}
	if _, err := b.pool.Exec(context.Background(), `DELETE FROM broker.river_job WHERE args->>'operation_id' = $1`, op); err != nil {
		t.Fatal(err)
	}
	lo := b.expect(b.do("GET", path+"/last_operation?operation="+op, nil), 200)
	if lo.str("state") != "failed" || !strings.Contains(lo.str("description"), "Provisioning failed: the broker stopped working on it") {
		t.Fatalf("with its job gone: %s", lo.raw)
	}
	b.expect(b.do("DELETE", path+q(planSmall), nil), 200)
}

// TestProvisionBeyondCapacity: a provision the target cluster has no
// connection slots for is refused at once, whether the platform waits or
// not, with an OSB error that says why; nothing is left behind.
func TestProvisionBeyondCapacity(t *testing.T) {
	t.Parallel()
	// Every slot of the tests' cluster is kept for Bindery: no plan fits.
	b := setup(t, func(o *options) { o.reserved = 10000 })
	for _, async := range []string{"", "?accepts_incomplete=true"} {
		id := randomID("full")
		r := b.expect(b.do("PUT", "/v2/service_instances/"+id+async, provisionBody(planSmall, nil)), 422)
		if r.str("error") != broker.CodeCapacityExceeded ||
			!strings.HasPrefix(r.str("description"), "The target cluster has no room for a database of 10 connections: of its max_connections") {
			t.Errorf("PUT %s: %s", async, r.raw)
		}
		b.expect(b.do("GET", "/v2/service_instances/"+id+"/last_operation", nil), 404)
	}
}
