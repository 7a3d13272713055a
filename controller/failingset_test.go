package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// failingSet is a one-slot engine whose breaker never opens, and call,
// which has the object id make one request of verb that ends with err.
func failingSet(t *testing.T) (c *Controller, b *catalog.Broker, call func(id, verb string, err error)) {
	t.Helper()
	c, b = oneSlotEngine(t)
	c.gates.failureLimit = 1 << 30
	call = func(id, verb string, err error) {
		r := &run{key: instanceKey("test", id)}
		ctx := context.WithValue(context.Background(), runKey{}, r)
		if e := c.enter(ctx, b, nil); e != nil {
			t.Fatal(e)
		}
		c.slots <- struct{}{} // the reconcile's worker
		_, done := c.brokerCall(ctx, verb)
		_ = done(err)
		<-c.slots
		c.gates.finish(r, time.Now())
	}
	return c, b, call
}

// failing is how many objects b's gate holds as failing, and how many
// backoffs the gates hold lifted.
func failing(c *Controller, b *catalog.Broker) (objects, lifted int) {
	c.gates.mu.Lock()
	defer c.gates.mu.Unlock()
	return len(c.gates.byID[b.ID].failing), len(c.gates.bypass)
}

// TestFailingForgotten: a broker's gate keeps the objects whose request
// failed (a 5xx, a timeout), so that their backoff is lifted when its
// breaker closes. An object left them only when a request of the verb
// that failed succeeded, or when a probe closed the breaker: one whose
// provision failed and that was then deleted (its deprovision answered),
// abandoned or refused for good stayed for as long as the breaker never
// opened, and the set grew with every such object; a breaker that closed
// at last then parked and retried all of them. An object now leaves the
// set when the broker answers any of its requests, when its deletion
// comes through the change feed (its lifted backoff too), and the set is
// bounded.
func TestFailingForgotten(t *testing.T) {
	t.Parallel()
	t.Run("answered", func(t *testing.T) {
		t.Parallel()
		c, b, call := failingSet(t)
		for i := range 100 {
			id := fmt.Sprint("deleted-", i)
			call(id, "provision", &osb.HTTPError{Status: 500})
			call(id, "deprovision", nil)
			id = fmt.Sprint("refused-", i)
			call(id, "provision", &osb.HTTPError{Status: 503})
			call(id, "provision", &osb.HTTPError{Status: 400})
		}
		if n, _ := failing(c, b); n != 0 {
			t.Errorf("%d objects that the broker answered since are still failing", n)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		t.Parallel()
		c, b, call := failingSet(t)
		call("gone", "provision", &osb.HTTPError{Status: 500})
		call("lifted", "provision", &osb.HTTPError{Status: 500})
		c.gates.lift(instanceKey("test", "lifted"), "provision")
		for _, id := range []string{"gone", "lifted"} {
			obj := &catalog.RawObject{}
			obj.ID, obj.Namespace = id, "test"
			c.enqueueChange(context.Background(), catalog.Change{Revision: 7, Kind: catalog.KindInstance, Type: catalog.Deleted, Object: obj})
		}
		if n, lifted := failing(c, b); n != 0 || lifted != 0 {
			t.Errorf("after their deletion, %d objects still failing and %d backoffs lifted", n, lifted)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		c, b, call := failingSet(t)
		for i := range maxFailing + 100 {
			call(fmt.Sprint("obj-", i), "provision", &osb.HTTPError{Status: 500})
		}
		if n, _ := failing(c, b); n != maxFailing {
			t.Errorf("%d objects failing, want the bound, %d", n, maxFailing)
		}
	})
}
