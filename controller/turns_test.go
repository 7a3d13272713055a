package controller

import (
	"slices"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestHandedKeysGoFirst: an object handed a broker slot is reconciled
// before the objects queued ahead of it, whether it was queued already
// (it moves up) or not (it goes in first), and nothing is lost or
// reconciled twice on the way.
func TestHandedKeysGoFirst(t *testing.T) {
	t.Parallel()
	c := queueOnly(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		c.queue.Add(instanceKey("test", id))
	}
	c.turns.handed(instanceKey("test", "c")) // queued already: it moves up
	c.queue.Add(instanceKey("test", "c"))
	c.turns.handed(instanceKey("test", "e")) // not queued: it goes in first
	c.queue.Add(instanceKey("test", "e"))
	c.queue.Add(instanceKey("test", "f"))
	if got, want := drain(c), []string{"c", "e", "a", "b", "d", "f"}; !slices.Equal(got, want) {
		t.Fatalf("reconciled in the order %v, want %v", got, want)
	}
	// A key that moved up leaves its old place behind, skipped: queued
	// again, it is reconciled once, in its new place.
	c.queue.Add(instanceKey("test", "a"))
	c.queue.Add(instanceKey("test", "c"))
	c.turns.handed(instanceKey("test", "c"))
	c.queue.Add(instanceKey("test", "c"))
	key, _ := c.queue.Get()
	c.queue.Done(key)
	c.queue.Add(instanceKey("test", "c"))
	c.queue.Add(instanceKey("test", "b"))
	if got, want := append([]string{key.id}, drain(c)...), []string{"c", "a", "c", "b"}; !slices.Equal(got, want) {
		t.Fatalf("reconciled in the order %v, want %v", got, want)
	}
}

// TestNamespacesTakeTurns: the workqueue serves namespaces in turn, each
// one's keys in the order they came, and a key handed a broker slot still
// goes first.
func TestNamespacesTakeTurns(t *testing.T) {
	t.Parallel()
	c := queueOnly(t)
	for _, k := range []objectKey{instanceKey("a", "a1"), instanceKey("a", "a2"), instanceKey("a", "a3"),
		bindingKey("b", "b1"), instanceKey("a", "a4"), instanceKey("c", "c1"), bindingKey("b", "b2")} {
		c.queue.Add(k)
	}
	c.turns.handed(instanceKey("a", "a4"))
	c.queue.Add(instanceKey("a", "a4"))
	if got, want := drain(c), []string{"a4", "a1", "b1", "c1", "a2", "b2", "a3"}; !slices.Equal(got, want) {
		t.Fatalf("reconciled in the order %v, want %v", got, want)
	}
}

// queueOnly is an engine whose queue alone is used.
func queueOnly(t *testing.T) *Controller {
	t.Helper()
	c, err := New(Config{Store: new(catalog.Store), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	return c
}

// drain takes every key of c's queue, in turn, and returns their ids.
func drain(c *Controller) []string {
	var got []string
	for c.queue.Len() > 0 {
		key, _ := c.queue.Get()
		got = append(got, key.id)
		c.queue.Done(key)
	}
	return got
}
