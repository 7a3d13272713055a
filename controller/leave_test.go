package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// oneSlotEngine is an engine, not running, whose brokers have one slot
// each, and a broker.
func oneSlotEngine(t *testing.T) (*Controller, *catalog.Broker) {
	t.Helper()
	c, err := New(Config{Store: new(catalog.Store), Workers: 1, BrokerMaxInflight: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	b := &catalog.Broker{}
	b.ID, b.Name = "broker-id", "broker"
	return c, b
}

// TestSlotGivenBackWithTheAnswer: a reconcile gives its broker slot back
// as soon as its request is answered, before it writes what the broker
// said, so the next in line gets the slot at once and the slot is not
// handed on twice when the reconcile ends.
func TestSlotGivenBackWithTheAnswer(t *testing.T) {
	t.Parallel()
	c, b := oneSlotEngine(t)
	reconcile := func(id string) (*run, context.Context) {
		r := &run{key: instanceKey("test", id)}
		return r, context.WithValue(context.Background(), runKey{}, r)
	}
	inflight := func() int {
		c.gates.mu.Lock()
		defer c.gates.mu.Unlock()
		return c.gates.byID[b.ID].inflight
	}

	started := time.Now()
	first, ctx := reconcile("first")
	if err := c.enter(ctx, b, nil); err != nil {
		t.Fatalf("the first reconcile found no slot: %v", err)
	}
	_, second := reconcile("second")
	if err := c.enter(second, b, nil); !errors.Is(err, errBrokerBusy) {
		t.Fatalf("the second reconcile entered with the only slot taken: %v", err)
	}
	c.slots <- struct{}{} // the first reconcile's worker
	_, done := c.brokerCall(ctx, "provision")
	if err := done(nil); err != nil {
		t.Fatal(err)
	}
	// Answered: the first still holds its worker, but the slot is the
	// second's, which is queued again.
	if first.gate != nil {
		t.Fatal("the first reconcile still holds its broker slot after the answer")
	}
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("%d objects queued after the answer; the one waiting for the slot should be", n)
	}
	if key, _ := c.queue.Get(); key != instanceKey("test", "second") {
		t.Fatalf("%v was queued, not the object waiting for the slot", key)
	}
	again, second := reconcile("second")
	if err := c.enter(second, b, nil); err != nil {
		t.Fatalf("the object handed the slot could not take it: %v", err)
	}
	c.gates.finish(first, started)
	if n := inflight(); n != 1 {
		t.Fatalf("%d requests in flight once the first reconcile ended; the second's is", n)
	}
	c.gates.finish(again, started)
	if n := inflight(); n != 0 {
		t.Fatalf("%d requests in flight once both reconciles ended", n)
	}
}

// TestPollKeepsItsSlotForTheFetch: the poll that finds a binding's
// asynchronous bind done keeps its slot for the fetch that follows, so a
// busy broker cannot have the binding poll for ever, its fetch waiting
// in line each time; the fetch's answer gives the slot back.
func TestPollKeepsItsSlotForTheFetch(t *testing.T) {
	t.Parallel()
	c, b := oneSlotEngine(t)
	r := &run{key: bindingKey("test", "polled")}
	ctx := context.WithValue(context.Background(), runKey{}, r)
	if err := c.enter(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	c.slots <- struct{}{} // the reconcile's worker
	keepSlot(ctx)
	_, done := c.brokerCall(ctx, "last_operation")
	if err := done(nil); err != nil {
		t.Fatal(err)
	}
	other := context.WithValue(context.Background(), runKey{}, &run{key: bindingKey("test", "other")})
	if r.gate == nil {
		t.Fatal("the poll gave its slot back before the fetch")
	}
	if err := c.enter(other, b, nil); !errors.Is(err, errBrokerBusy) {
		t.Fatalf("another object entered while the poll's slot was kept: %v", err)
	}
	_, done = c.brokerCall(ctx, "fetch_binding")
	if err := done(nil); err != nil {
		t.Fatal(err)
	}
	if r.gate != nil {
		t.Fatal("the fetch's answer did not give the slot back")
	}
	if key, _ := c.queue.Get(); key != bindingKey("test", "other") {
		t.Fatalf("%v was handed the slot, not the object in line", key)
	}
}
