package controller

import (
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// turns is the storage under the engine's workqueue: a fair line, each
// namespace's objects first in, first out and the namespaces in turn
// (fair.go), except that an object handed a broker slot from the waiting
// line (gates.reserve) goes before every other. Its slot is counted as in
// flight from the moment it is handed over, so if the object waited
// behind a long queue — thousands of new objects, say — the slot would
// stand idle meanwhile, and every object that came to the broker would
// find its slots taken and join the line itself, to be read once more
// when its turn came: a line that, once formed, would not drain while
// the backlog lasted.
//
// The workqueue calls Push, Touch, Len and Pop with its lock held, and
// keeps each key in the storage at most once; turns' own lock is taken
// inside both the workqueue's and the gates', never the other way round.
type turns struct {
	mu sync.Mutex
	// ahead are the keys handed a slot and not yet popped.
	ahead map[objectKey]bool
	// first and rest are the two lines; where says which one holds each
	// key, and a key moved to first leaves a stale entry in rest, skipped.
	first fifo[objectKey]
	rest  fairLine
	where map[objectKey]line
	n     int
}

type line uint8

const (
	inRest line = iota + 1
	inFirst
)

func newTurns() *turns {
	return &turns{ahead: map[objectKey]bool{}, where: map[objectKey]line{}, rest: newFairLine()}
}

// queue is the engine's workqueue, rate-limited by limiter, over t.
func (t *turns) queue(limiter workqueue.TypedRateLimiter[objectKey]) workqueue.TypedRateLimitingInterface[objectKey] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[objectKey]{
		DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[objectKey]{
			Name:  "bindery",
			Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[objectKey]{Name: "bindery", Queue: t}),
		}),
	})
}

// handed says key was handed a slot: it goes first, wherever it is queued
// (the workqueue's Add, which follows, touches it or pushes it).
func (t *turns) handed(key objectKey) {
	t.mu.Lock()
	t.ahead[key] = true
	t.mu.Unlock()
}

// Push queues a key the workqueue does not hold.
func (t *turns) Push(key objectKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	if t.ahead[key] {
		t.where[key] = inFirst
		t.first.push(key)
		return
	}
	t.where[key] = inRest
	t.rest.push(key)
}

// Touch: key, queued already, was added again; if it was handed a slot
// since, it moves to the first line.
func (t *turns) Touch(key objectKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ahead[key] && t.where[key] == inRest {
		t.where[key] = inFirst
		t.first.push(key)
	}
}

func (t *turns) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Pop takes the next key: the first line's, then the rest's.
func (t *turns) Pop() objectKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		key, from := t.popFrom()
		if t.where[key] != from {
			continue // moved to the first line
		}
		delete(t.where, key)
		delete(t.ahead, key)
		t.n--
		return key
	}
}

// popFrom takes the head of the first line, or else the rest's next. t.mu
// is held, and some key is queued.
func (t *turns) popFrom() (objectKey, line) {
	if t.first.len() > 0 {
		return t.first.pop(), inFirst
	}
	key, _ := t.rest.pop()
	return key, inRest
}
