package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestNamespaceNotBehindAnother: a namespace that created many instances
// on a slow broker does not put another namespace's one instance behind
// all of them. With two slots at the broker and 60 instances of one
// namespace waiting for them, an instance of another namespace created
// next is provisioned after at most a few of the first's, not after
// every one; and every instance is provisioned.
func TestNamespaceNotBehindAnother(t *testing.T) {
	t.Parallel()
	const flood, slots, delay = 60, 2, 150 * time.Millisecond
	e := setup(t, func(o *engineOptions) { o.workers, o.maxInflight = 4, slots })
	fake := e.registerFake()
	fake.Fail(osbtest.VerbProvision, osbtest.Failure{Delay: delay})
	in := func(ns string) func(*catalog.Instance) { return func(in *catalog.Instance) { in.Namespace = ns } }
	var ins []*catalog.Instance
	for i := range flood {
		ins = append(ins, e.createInstance(fmt.Sprintf("db-%d", i), osbtest.DefaultService, osbtest.PlanSync, nil, in("busy")))
	}
	waitFor(t, 10*time.Second, "the first provisions", func() bool { return fake.Count(osbtest.VerbProvision) >= slots })
	created := time.Now()
	quiet := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil, in("quiet"))
	e.waitInstance(quiet.ID, "Ready", instanceReady)
	took := time.Since(created)
	ahead := 0
	for _, r := range fake.Requests() {
		if r.Verb != osbtest.VerbProvision || r.Time.Before(created) {
			continue
		}
		if strings.Contains(r.Path, quiet.Spec.ExternalID) {
			break
		}
		ahead++
	}
	t.Logf("the other namespace's instance was provisioned after %d of the busy one's, Ready in %s", ahead, took.Round(time.Millisecond))
	// In flight when it came, and the busy namespace's turn before its
	// own in the broker's line and in the workqueue.
	if ahead > slots+2 {
		t.Errorf("the other namespace's instance waited behind %d of the busy namespace's provisions (%s)", ahead, took.Round(time.Millisecond))
	}
	for _, in := range ins {
		e.waitInstance(in.ID, "Ready", instanceReady)
	}
}
