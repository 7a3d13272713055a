package controller_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestRealBrokerLifecycle drives Bindery's own broker through the engine:
// an instance and a binding become Ready with working credentials; deleting
// the binding and then the instance drops the role and the database.
func TestRealBrokerLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.registerBindery()
	ctx := context.Background()
	in := e.createInstance("db", "postgresql", "small", map[string]any{"statement_timeout_ms": 4000})
	e.waitInstance(in.ID, "Ready", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	creds, err := e.store.Credentials(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, creds["uri"].(string))
	if err != nil {
		t.Fatalf("connect with the binding's credentials: %v", err)
	}
	var timeout string
	if err := conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "4s" {
		t.Errorf("statement_timeout %q (%v): the instance's parameters did not reach the broker", timeout, err)
	}
	conn.Close(ctx)

	// The instance's deletion waits for its binding.
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitInstance(in.ID, "waiting for bindings", func(in *catalog.Instance) bool {
		return condition(in.Status.Conditions, catalog.ConditionReady).Reason == "DeprovisionBlockedByExistingCredentials"
	})
	if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("binding", func() error { _, err := e.store.GetBinding(ctx, b.ID); return err })
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })

	admin, err := pgx.Connect(ctx, pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	n := postgresql.InstanceNames(in.Spec.ExternalID)
	var dbs, roles int
	_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, n.Database).Scan(&dbs)
	_ = admin.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = ANY($1)`, []string{n.Owner, creds["username"].(string)}).Scan(&roles)
	if dbs != 0 || roles != 0 {
		t.Fatalf("left behind: %d databases, %d roles", dbs, roles)
	}
	for _, secret := range []string{creds["password"].(string), "osb-pass"} {
		if strings.Contains(e.logs.String(), secret) {
			t.Error("a credential is in the engine's log")
		}
	}
}

// TestOrphanMitigation has one case per row of the OSB 2.17
// orphan-mitigation table that a provision or bind can hit.
func TestOrphanMitigation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		verb    osbtest.Verb
		failure osbtest.Failure
		async   bool
		// orphan: the broker must get a deprovision (or unbind) for the
		// failed request; ready: the object ends Ready after retrying;
		// permanent: it ends Failed and is not retried.
		orphan, ready, permanent bool
	}{
		{"provision 500", osbtest.VerbProvision, osbtest.Failure{Status: 500, Times: 1}, false, true, true, false},
		// OSB 2.17's table: "200 with malformed response" is a failure
		// without orphan mitigation, for provision and bind alike.
		{"provision 200 malformed", osbtest.VerbProvision, osbtest.Failure{Status: 200, Body: "not json", Times: 1}, false, false, true, false},
		{"provision 201 malformed", osbtest.VerbProvision, osbtest.Failure{Status: 201, Body: "not json", Times: 1}, false, true, true, false},
		{"provision 202 malformed", osbtest.VerbProvision, osbtest.Failure{Status: 202, Body: "[]", Times: 1}, false, true, true, false},
		{"provision other 2xx", osbtest.VerbProvision, osbtest.Failure{Status: 204, Times: 1}, false, true, true, false},
		{"provision timeout", osbtest.VerbProvision, osbtest.Failure{Delay: 4 * time.Second, Times: 1}, false, true, true, false},
		{"provision 408", osbtest.VerbProvision, osbtest.Failure{Status: 408, Times: 1}, false, false, true, false},
		{"provision 422 ConcurrencyError", osbtest.VerbProvision, osbtest.Failure{Status: 422, Code: "ConcurrencyError", Times: 1}, false, false, true, false},
		{"provision 400", osbtest.VerbProvision, osbtest.Failure{Status: 400, Description: "bad parameters", Times: 1}, false, false, false, true},
		{"provision 409", osbtest.VerbProvision, osbtest.Failure{Status: 409, Times: 1}, false, false, false, true},
		{"async provision failed", osbtest.VerbProvision, osbtest.Failure{AsyncFailed: true, Times: 1}, true, true, true, false},
		{"bind 500", osbtest.VerbBind, osbtest.Failure{Status: 500, Times: 1}, false, true, true, false},
		{"bind 200 malformed", osbtest.VerbBind, osbtest.Failure{Status: 200, Body: "[1]", Times: 1}, false, false, true, false},
		{"bind 201 malformed", osbtest.VerbBind, osbtest.Failure{Status: 201, Body: "{", Times: 1}, false, true, true, false},
		{"bind other 2xx", osbtest.VerbBind, osbtest.Failure{Status: 204, Times: 1}, false, true, true, false},
		{"bind 5xx other than 500", osbtest.VerbBind, osbtest.Failure{Status: 503, Times: 1}, false, true, true, false},
		{"bind 422 ConcurrencyError", osbtest.VerbBind, osbtest.Failure{Status: 422, Code: "ConcurrencyError", Times: 1}, false, false, true, false},
		{"bind 409", osbtest.VerbBind, osbtest.Failure{Status: 409, Times: 1}, false, false, false, true},
		{"bind timeout", osbtest.VerbBind, osbtest.Failure{Delay: 4 * time.Second, Times: 1}, false, true, true, false},
		{"bind 408", osbtest.VerbBind, osbtest.Failure{Status: 408, Times: 1}, false, false, true, false},
		{"bind 400", osbtest.VerbBind, osbtest.Failure{Status: 400, Times: 1}, false, false, false, true},
		{"async bind failed", osbtest.VerbBind, osbtest.Failure{AsyncFailed: true, Times: 1}, true, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			fake := e.registerFake(osbtest.WithRetryAfter(0), osbtest.WithPolls(0))
			ctx := context.Background()
			plan := osbtest.PlanSync
			if tc.async {
				plan = osbtest.PlanAsync
			}
			var in *catalog.Instance
			var b *catalog.Binding
			if tc.verb == osbtest.VerbProvision {
				fake.Fail(tc.verb, tc.failure)
				in = e.createInstance("db", osbtest.DefaultService, plan, nil)
			} else {
				in = e.createInstance("db", osbtest.DefaultService, plan, nil)
				e.waitInstance(in.ID, "Ready", instanceReady)
				fake.Fail(tc.verb, tc.failure)
				b = e.createBinding("app", "db")
			}
			undo := osbtest.VerbDeprovision
			if tc.verb == osbtest.VerbBind {
				undo = osbtest.VerbUnbind
			}
			switch {
			case tc.ready && in != nil && b == nil:
				e.waitInstance(in.ID, "Ready", instanceReady)
			case tc.ready:
				e.waitBinding(b.ID, "Ready", bindingReady)
			case tc.permanent && b == nil:
				got := e.waitInstance(in.ID, "Failed", failedFor)
				if !strings.Contains(got.Status.LastError, "broker answered") {
					t.Errorf("status does not say why: %q", got.Status.LastError)
				}
			case tc.permanent:
				e.waitBinding(b.ID, "Failed", func(b *catalog.Binding) bool {
					return condition(b.Status.Conditions, catalog.ConditionFailed).Status == catalog.ConditionTrue
				})
			}
			if got := fake.Count(undo); (got > 0) != tc.orphan {
				t.Errorf("%d %s calls; orphan mitigation expected: %v", got, undo, tc.orphan)
			}
			// Every row here is a failure in the platform's interpretation:
			// the history says so.
			id := in.ID
			if b != nil {
				id = b.ID
			}
			if events, _ := e.store.Events(ctx, id, 0); !slices.ContainsFunc(events, func(ev catalog.Event) bool { return ev.Type == "Warning" }) {
				t.Errorf("the failure is not in the history: %+v", events)
			}
			// Whatever happened, cleaning up leaves nothing at the broker.
			if b != nil {
				if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
					t.Fatal(err)
				}
				e.waitGone("binding", func() error { _, err := e.store.GetBinding(ctx, b.ID); return err })
			}
			if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
				t.Fatal(err)
			}
			e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
			// The engine took the instance up again to delete it; a
			// permanent failure it had retried meanwhile shows here.
			if tc.permanent && b == nil {
				if n := fake.Count(tc.verb); n != 1 {
					t.Errorf("a permanent failure was retried: %d %s calls", n, tc.verb)
				}
			}
			for _, inst := range fake.Instances() {
				if inst.State != osbtest.StateDeleting {
					t.Errorf("orphan at the broker: instance %s in state %s", inst.ID, inst.State)
				}
			}
			if bs := fake.Bindings(); len(bs) > 0 {
				t.Errorf("orphan bindings at the broker: %v", bs)
			}
		})
	}
}

// TestRefusalAfterAnEarlierAttempt: a provision or bind the broker
// refused (a 4xx) used to mark the object as having nothing at the
// broker, whatever earlier attempts had done. After a malformed 200 (the
// broker created it; OSB's table has no orphan mitigation for it) the
// next attempt's 409 ("exists with different attributes") or 400 left
// it Failed and NotRequired, and its deletion removed it without a
// deprovision or unbind: the broker kept the instance running, the
// binding's credentials valid. A 409 said so even on the first attempt.
// Now a refusal keeps the deletion's request when an earlier attempt may
// have created something, and a 409 always keeps it.
func TestRefusalAfterAnEarlierAttempt(t *testing.T) {
	t.Parallel()
	malformed := osbtest.Failure{Status: 200, Body: "{", Times: 1}
	for _, tc := range []struct {
		name     string
		verb     osbtest.Verb
		failures []osbtest.Failure
		// undo: the deletion must ask the broker (deprovision, unbind).
		undo bool
	}{
		{"provision 409 after a malformed 200", osbtest.VerbProvision, []osbtest.Failure{malformed, {Status: 409, Times: 1}}, true},
		{"provision 400 after a malformed 200", osbtest.VerbProvision, []osbtest.Failure{malformed, {Status: 400, Times: 1}}, true},
		{"provision 409 first", osbtest.VerbProvision, []osbtest.Failure{{Status: 409, Times: 1}}, false},
		{"provision 400 first", osbtest.VerbProvision, []osbtest.Failure{{Status: 400, Times: 1}}, false},
		{"bind 409 after a malformed 200", osbtest.VerbBind, []osbtest.Failure{malformed, {Status: 409, Times: 1}}, true},
		{"bind 400 after a malformed 200", osbtest.VerbBind, []osbtest.Failure{malformed, {Status: 400, Times: 1}}, true},
		{"bind 409 first", osbtest.VerbBind, []osbtest.Failure{{Status: 409, Times: 1}}, false},
		{"bind 400 first", osbtest.VerbBind, []osbtest.Failure{{Status: 400, Times: 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			fake := e.registerFake()
			ctx := context.Background()
			fail := func() {
				for _, f := range tc.failures {
					fake.Fail(tc.verb, f)
				}
			}
			if tc.verb == osbtest.VerbProvision {
				fail()
			}
			in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
			undo, external := osbtest.VerbDeprovision, in.Spec.ExternalID
			if tc.verb == osbtest.VerbProvision {
				e.waitInstance(in.ID, "Failed", failedFor)
				if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
					t.Fatal(err)
				}
				e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
			} else {
				e.waitInstance(in.ID, "Ready", instanceReady)
				fail()
				b := e.createBinding("app", "db")
				undo, external = osbtest.VerbUnbind, b.Spec.ExternalID
				e.waitBinding(b.ID, "Failed", func(b *catalog.Binding) bool {
					return condition(b.Status.Conditions, catalog.ConditionFailed).Status == catalog.ConditionTrue
				})
				if _, err := e.store.DeleteBinding(ctx, b.ID); err != nil {
					t.Fatal(err)
				}
				e.waitGone("binding", func() error { _, err := e.store.GetBinding(ctx, b.ID); return err })
			}
			if n := len(callsFor(fake, undo, external)); (n > 0) != tc.undo {
				t.Errorf("the deletion made %d %s calls; want some: %v", n, undo, tc.undo)
			}
			if tc.verb == osbtest.VerbProvision && len(fake.Instances()) > 0 {
				t.Errorf("left at the broker: %+v", fake.Instances())
			}
			if bs := fake.Bindings(); len(bs) > 0 {
				t.Errorf("left at the broker: %+v", bs)
			}
		})
	}
}

// TestConflictOnAFirstProvisionIsNotOurs: an instance whose externalID
// names an instance that is not its own at the broker (an abandoned one,
// or another platform's sharing the broker: the id is only unique among
// Bindery's instances) is refused 409 on its first provision. Deleting
// it must not deprovision the other: nothing of this instance was ever
// there. A 409 used to keep the deletion's deprovision required, so the
// delete deprovisioned the other instance.
func TestConflictOnAFirstProvisionIsNotOurs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	a := e.createInstance("abandoned", osbtest.DefaultService, osbtest.PlanSync, map[string]any{"size": 1})
	e.waitInstance(a.ID, "Ready", instanceReady)
	if _, err := e.store.AbandonInstance(ctx, a.ID, "test"); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, a.ID); return err })
	b := e.createInstance("copy", osbtest.DefaultService, osbtest.PlanSync, map[string]any{"size": 2}, func(in *catalog.Instance) {
		in.Spec.ExternalID = a.Spec.ExternalID
	})
	e.waitInstance(b.ID, "Failed", failedFor)
	if _, err := e.store.DeleteInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, b.ID); return err })
	if n := len(callsFor(fake, osbtest.VerbDeprovision, a.Spec.ExternalID)); n != 0 || len(fake.Instances()) != 1 {
		t.Errorf("deleting the refused instance made %d deprovision calls of the other's id, and left %d instances at the broker; want none and 1", n, len(fake.Instances()))
	}
}

// TestUpdates covers plan and parameter changes, and an update the broker
// refuses (recorded, not orphan-mitigated, not retried).
func TestUpdates(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithRetryAfter(0), osbtest.WithPolls(0))
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, map[string]any{"size": 1})
	e.waitInstance(in.ID, "Ready", instanceReady)
	if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Spec.ClusterServicePlanExternalName = osbtest.PlanAsync
		in.Spec.Parameters = []byte(`{"size": 2}`)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := e.waitInstance(in.ID, "updated", func(in *catalog.Instance) bool {
		return instanceReady(in) && in.Status.ReconciledGeneration == in.Generation
	})
	_, asyncPlan := fake.IDs(osbtest.DefaultService, osbtest.PlanAsync)
	if inst := fake.Instances()[0]; inst.PlanID != asyncPlan || inst.Parameters["size"] != float64(2) {
		t.Errorf("broker has plan %s params %v", inst.PlanID, inst.Parameters)
	}
	if got.Status.ExternalProperties.ClusterServicePlanExternalName != osbtest.PlanAsync {
		t.Errorf("externalProperties: %+v", got.Status.ExternalProperties)
	}
	fake.Fail(osbtest.VerbUpdate, osbtest.Failure{Status: 400, Description: "size too large", Times: 1})
	if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Spec.Parameters = []byte(`{"size": 99}`)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = e.waitInstance(in.ID, "Failed", failedFor)
	if !strings.Contains(condition(got.Status.Conditions, catalog.ConditionFailed).Message, "size too large") {
		t.Errorf("failure not explained: %+v", got.Status.Conditions)
	}
	if fake.Count(osbtest.VerbDeprovision) != 0 {
		t.Error("a failed update was orphan-mitigated")
	}
}

// TestAsyncOperationToken checks that the operation the broker returned
// comes back on every poll, percent-encoded, and that the originating
// identity is sent.
func TestAsyncOperationToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithAsync(), osbtest.WithPolls(2), osbtest.WithRetryAfter(0), osbtest.WithOperationPrefix("op/1 +x&y=%#"))
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanAsync, nil, func(in *catalog.Instance) {
		in.Spec.UserInfo = &catalog.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"dev"}}
	})
	e.waitInstance(in.ID, "Ready", instanceReady)
	polls := 0
	for _, r := range fake.Requests() {
		switch r.Verb {
		case osbtest.VerbLastOperation:
			polls++
			if !strings.HasPrefix(r.Query.Get("operation"), "op/1 +x&y=%#") {
				t.Errorf("poll sent operation %q", r.Query.Get("operation"))
			}
		case osbtest.VerbProvision:
			platform, value, _ := strings.Cut(r.OriginatingIdentity, " ")
			raw, _ := base64.StdEncoding.DecodeString(value)
			if platform != "kubernetes" || !strings.Contains(string(raw), `"username":"alice"`) {
				t.Errorf("originating identity %q (%s)", r.OriginatingIdentity, raw)
			}
		}
	}
	if polls < 3 {
		t.Errorf("%d polls, want at least 3", polls)
	}
}

// TestRestartDuringAsyncProvision stops the engine while an asynchronous
// provision runs; a new engine polls the same operation instead of
// provisioning again: one instance at the broker, no orphan.
func TestRestartDuringAsyncProvision(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithAsync(), osbtest.WithPolls(6), osbtest.WithRetryAfter(0))
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanAsync, nil)
	e.waitInstance(in.ID, "polling", func(in *catalog.Instance) bool { return in.Status.AsyncOpInProgress })
	e.stop()
	polls := fake.Count(osbtest.VerbLastOperation)
	e.start()
	e.waitInstance(in.ID, "Ready", instanceReady)
	if n := fake.Count(osbtest.VerbProvision); n != 1 {
		t.Errorf("%d provision requests: the restart provisioned again", n)
	}
	if fake.Count(osbtest.VerbLastOperation) <= polls {
		t.Error("the new engine did not poll")
	}
	if n := len(fake.Instances()); n != 1 {
		t.Errorf("%d instances at the broker", n)
	}
}

// TestBrokerDownThenBack: requests to a broker that is down are retried
// until it is back; nothing is lost.
func TestBrokerDownThenBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	fake.Down()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "retrying", func(in *catalog.Instance) bool {
		// The request does not reach the broker: Service Catalog's reason.
		return condition(in.Status.Conditions, catalog.ConditionReady).Reason == "ErrorCallingProvision"
	})
	fake.Up()
	e.waitInstance(in.ID, "Ready", instanceReady)
}

// TestAbandon removes an instance without calling a broker that is gone.
func TestAbandon(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	fake.Down()
	if _, err := e.store.UpdateInstance(ctx, in.ID, 0, func(in *catalog.Instance) error {
		in.Annotations = map[string]string{controller.AbandonAnnotation: "true"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("abandoned instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
}

// TestBindingRotation rotates a binding of Bindery's own broker: the
// successor gets new credentials from the broker (predecessor_binding_id),
// both work, and the successor keeps working when the predecessor goes.
func TestBindingRotation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.registerBindery()
	ctx := context.Background()
	in := e.createInstance("db", "postgresql", "small", nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	old := e.createBinding("app", "db")
	e.waitBinding(old.ID, "Ready", bindingReady)
	next := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}, PredecessorBindingRef: &catalog.BindingRef{Name: "app"}}}
	next.Name, next.Namespace = "app-next", "test"
	next, err := e.store.CreateBinding(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	e.waitBinding(next.ID, "Ready", bindingReady)
	oldCreds, _ := e.store.Credentials(ctx, old.ID)
	newCreds, _ := e.store.Credentials(ctx, next.ID)
	if oldCreds["username"] == newCreds["username"] {
		t.Fatal("the rotated binding has the predecessor's role")
	}
	for _, creds := range []map[string]any{oldCreds, newCreds} {
		conn, err := pgx.Connect(ctx, creds["uri"].(string))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		conn.Close(ctx)
	}
	if _, err := e.store.DeleteBinding(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("predecessor", func() error { _, err := e.store.GetBinding(ctx, old.ID); return err })
	conn, err := pgx.Connect(ctx, newCreds["uri"].(string))
	if err != nil {
		t.Fatalf("the successor stopped working with its predecessor: %v", err)
	}
	conn.Close(ctx)
	// A plan that does not rotate refuses a rotation up front.
	fake := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	e.register("fake", fake.URL(), "u", "p")
	fin := e.createInstance("other", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(fin.ID, "Ready", instanceReady)
	fb := e.createBinding("first", "other")
	e.waitBinding(fb.ID, "Ready", bindingReady)
	rb := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "other"}, PredecessorBindingRef: &catalog.BindingRef{Name: "first"}}}
	rb.Name, rb.Namespace = "second", "test"
	if _, err := e.store.CreateBinding(ctx, rb); !errors.Is(err, catalog.ErrUnprocessable) {
		t.Errorf("rotating a binding of a plan without binding_rotatable: %v", err)
	}
}

// TestPollingLimits: Retry-After spaces the polls; an operation that runs
// past the plan's maximum_polling_duration counts as failed (and the
// provision is orphan-mitigated).
func TestPollingLimits(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake(osbtest.WithAsync(), osbtest.WithPolls(100000), osbtest.WithRetryAfter(700*time.Millisecond))
	services := fake.Catalog()
	for i := range services[0].Plans {
		services[0].Plans[i].MaximumPollingDuration = 2
	}
	fake.SetCatalog(services)
	b, _ := e.store.GetBroker(context.Background(), "fake")
	if _, err := e.store.Relist(context.Background(), b.ID); err != nil {
		t.Fatal(err)
	}
	in := e.createInstance("slow", osbtest.DefaultService, osbtest.PlanAsync, nil)
	e.waitInstance(in.ID, "orphan-mitigated", func(in *catalog.Instance) bool {
		return condition(in.Status.Conditions, catalog.ConditionOrphanMitigation).Reason != ""
	})
	var polls []time.Time
	for _, r := range fake.Requests() {
		if r.Verb == osbtest.VerbLastOperation && (len(polls) == 0 || r.Time.Sub(polls[0]) < 2*time.Second) {
			polls = append(polls, r.Time)
		}
	}
	if len(polls) < 2 || len(polls) > 4 {
		t.Fatalf("%d polls in a 2 s window with Retry-After 0.7 s", len(polls))
	}
	for i := 1; i < len(polls); i++ {
		if gap := polls[i].Sub(polls[i-1]); gap < 600*time.Millisecond {
			t.Errorf("polls %v apart despite Retry-After 0.7s", gap)
		}
	}
	// The orphan mitigation is recorded in status first, then sent.
	eventually.Succeeds(t, 20*time.Second, func(context.Context) error {
		if fake.Count(osbtest.VerbDeprovision) == 0 {
			return errors.New("the provision that outlived its maximum polling duration was not orphan-mitigated")
		}
		return nil
	})
}

// TestDeprovisionRetried: a deprovision the broker refuses with 500 is
// retried until it succeeds; the instance is never forgotten.
func TestDeprovisionRetried(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	fake.Fail(osbtest.VerbDeprovision, osbtest.Failure{Status: 500, Description: "try later", Times: 3})
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
	events, err := e.store.Events(ctx, in.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Identical failures are folded into one entry that counts them.
	entries, failures := 0, 0
	for _, ev := range events {
		if ev.Reason == "DeprovisionCallFailed" {
			entries++
			failures += ev.Count
		}
	}
	if entries != 1 || failures != 3 {
		t.Errorf("%d history entries counting %d failed deprovisions, want 1 counting 3", entries, failures)
	}
	if n := fake.Count(osbtest.VerbDeprovision); n != 4 {
		t.Errorf("%d deprovision calls, want 3 failures and a success", n)
	}
	if len(fake.Instances()) != 0 {
		t.Errorf("left at the broker: %v", fake.Instances())
	}
}

// TestOtherFinalizers: an instance with a finalizer that is not Bindery's
// is deprovisioned on deletion but kept until that finalizer goes.
func TestOtherFinalizers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	fake := e.registerFake()
	ctx := context.Background()
	in := e.createInstance("kept", osbtest.DefaultService, osbtest.PlanSync, nil, func(in *catalog.Instance) {
		in.Finalizers = []string{"example.com/backup"}
	})
	e.waitInstance(in.ID, "Ready", instanceReady)
	if _, err := e.store.DeleteInstance(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	e.waitInstance(in.ID, "waiting for its finalizer", func(in *catalog.Instance) bool {
		return catalog.Released(in)
	})
	if fake.Count(osbtest.VerbDeprovision) != 1 {
		t.Errorf("%d deprovision calls", fake.Count(osbtest.VerbDeprovision))
	}
	if _, err := e.store.UpdateInstanceMeta(ctx, in.ID, 0, func(m *catalog.Meta) error {
		m.Finalizers = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitGone("instance", func() error { _, err := e.store.GetInstance(ctx, in.ID); return err })
	if fake.Count(osbtest.VerbDeprovision) != 1 {
		t.Errorf("deprovisioned again: %d calls", fake.Count(osbtest.VerbDeprovision))
	}
}
