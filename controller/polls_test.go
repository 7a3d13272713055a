package controller

import (
	"context"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// TestPollsForgottenWithTheirObject: the engine keeps in memory the poll
// state of every object whose operation is in progress, until a write
// says none is; an object removed meanwhile (abandoned while its broker
// still works on it, or finalized by another replica) writes nothing
// more, so its deletion in the change feed drops its state, or one entry
// would stay for every such object for as long as the engine runs.
func TestPollsForgottenWithTheirObject(t *testing.T) {
	t.Parallel()
	c, err := New(Config{Store: new(catalog.Store), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	ctx := context.Background()
	for _, kind := range []string{catalog.KindInstance, catalog.KindBinding} {
		id := "id-of-a-" + kind
		c.accepted(id, time.Minute)
		if _, ok := c.polls.Load(id); !ok {
			t.Fatalf("%s: no poll state once its operation was accepted", kind)
		}
		obj := &catalog.RawObject{}
		obj.ID, obj.Namespace = id, "test"
		c.enqueueChange(ctx, catalog.Change{Revision: 7, Kind: kind, Type: catalog.Deleted, Object: obj})
		if _, ok := c.polls.Load(id); ok {
			t.Errorf("%s: its poll state is kept after its deletion", kind)
		}
	}
}
