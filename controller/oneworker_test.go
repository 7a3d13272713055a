package controller_test

import (
	"testing"

	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestOneWorker: an engine of one worker (--controller-workers 1)
// provisions and binds. A reconcile gives its worker back while its broker
// works and takes one again with the answer; the worker must not sit with
// the dispatcher, waiting for the next object to come, meanwhile.
func TestOneWorker(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *engineOptions) { o.workers = 1 })
	e.registerFake()
	in := e.createInstance("db", osbtest.DefaultService, osbtest.PlanSync, nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
}
