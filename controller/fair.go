package controller

// fairLine is a line of keys that serves namespaces in turn: each
// namespace's keys first in, first out, and the namespaces round robin,
// one key at a time. So a namespace that has 10,000 objects waiting puts
// another namespace's one object behind at most one of its own, not
// behind all of them: the engine's workqueue (turns) and each broker's
// waiting line (gates) are fair lines. Quotas bound how many objects a
// namespace has; this bounds how long the others wait for them.
//
// A fairLine is not safe for concurrent use: its owner's lock guards it.
type fairLine struct {
	// lines holds the keys of each namespace that has some queued.
	lines map[string]*fifo[objectKey]
	// turn is the namespaces with keys queued, in the order of their
	// next turn.
	turn fifo[string]
	n    int
}

func newFairLine() fairLine { return fairLine{lines: map[string]*fifo[objectKey]{}} }

// push queues key at the end of its namespace's line.
func (l *fairLine) push(key objectKey) {
	q := l.lines[key.namespace]
	if q == nil {
		q = &fifo[objectKey]{}
		l.lines[key.namespace] = q
		l.turn.push(key.namespace)
	}
	q.push(key)
	l.n++
}

// pop takes the first key of the namespace whose turn it is; the
// namespace's next turn comes after every other's.
func (l *fairLine) pop() (objectKey, bool) {
	if l.n == 0 {
		return objectKey{}, false
	}
	ns := l.turn.pop()
	q := l.lines[ns]
	key := q.pop()
	l.n--
	if q.len() > 0 {
		l.turn.push(ns)
	} else {
		delete(l.lines, ns)
	}
	return key, true
}

func (l *fairLine) len() int { return l.n }

// fifo is a first-in, first-out line whose array goes once it is empty.
type fifo[T any] struct{ items []T }

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

func (q *fifo[T]) len() int { return len(q.items) }

// pop takes the first item; the line is not empty.
func (q *fifo[T]) pop() T {
	v := q.items[0]
	var zero T
	q.items[0] = zero
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil
	}
	return v
}
