package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osb"
)

// Bulkheads: each broker gets at most --broker-max-inflight requests in
// flight from this process — provisions, updates, deprovisions, binds,
// unbinds, polls and orphan mitigation alike — and a circuit breaker.
//
// A reconcile that would call a broker first takes one of its slots, and
// gives it back as soon as the broker has answered (or the call timed
// out): what it then writes holds no slot, so with many objects to work
// on the slots are the requests in flight, not reconciles finishing up,
// and objects do not join the line (to be read again when their turn
// comes) while the broker is idle. When none is free it does not wait:
// the object joins the broker's waiting line, and the worker goes on with
// other objects; each slot given back goes straight to the first in line,
// which is queued again, ahead of every other object (turns.go). The
// wait for the broker itself holds no worker (run.go), so no broker, and
// no few brokers together, can take the workers from the others.
//
// The breaker opens after --broker-breaker-failures requests in a row that
// the broker failed (5xx, 429, a malformed answer) or did not answer
// (timeout, connection refused); a 4xx is an answer and counts as
// success. While it is open, no request goes to the broker: its objects
// join the waiting line and say why in their Ready condition, and the
// broker's Available condition and the metric
// bindery_controller_broker_circuit_open say so. After
// --broker-breaker-wait (doubling with each failed probe, and with each
// opening without a success between, up to five minutes, with jitter), a
// probe asks GET /v2/catalog — never a provision or a bind. When it
// answers 200 the breaker closes: the waiting objects, with those whose
// status-held backoff the outage lengthened, are retried at once instead
// of each waiting out its own backoff, paced: one request first, and the
// broker's slots double with each success (halve with each failure) up to
// --broker-max-inflight; and until one request succeeds, the first
// failure opens the breaker again. So a broker that answers its
// catalogue but fails everything else costs a request per opening, not
// a burst.

// Defaults of the bulkhead flags.
const (
	DefaultBrokerMaxInflight = 16
	DefaultBreakerFailures   = 5
	DefaultBreakerWait       = 5 * time.Second
	// breakerWaitCap bounds the wait between probes of a broker that
	// keeps failing them.
	breakerWaitCap = 5 * time.Minute
	// probeTimeout bounds a probe: it reads only the status line.
	probeTimeout = 10 * time.Second
)

// gate is one broker's slots, waiting line and breaker.
type gate struct {
	id, name, kind, namespace string
	// m are the metrics its series go to.
	m *brokerMetrics
	// forgotten: the broker was deleted; its probes stop and its slots
	// count nothing any more.
	forgotten bool
	// client is the broker's client the last reconcile used, for probes.
	client   *osb.Client
	inflight int
	// limit is the slots the broker has now: --broker-max-inflight,
	// or fewer after its breaker closed (doubling with each success).
	limit int
	// waiting is the line of objects that found no slot, or the breaker
	// open, each namespace's in turn (fair.go); parked holds the same
	// keys.
	waiting fairLine
	parked  map[objectKey]bool
	// failing are the objects whose request failed as the breaker counts
	// failures, with the verb of their first such failure, until the
	// broker answers a request of theirs or they are deleted (at most
	// maxFailing): their backoff is lifted when the breaker closes.
	failing map[objectKey]string

	open bool
	// probation: closed after a probe, with no request answered yet; the
	// first failure opens it again.
	probation bool
	failures  int // in a row
	opens     int // openings without a success between them
	// lastErr is the last failure, for the log and the broker's
	// condition; lastKind what kind it was, for its objects' Ready (the
	// same through an outage, so their condition is written once).
	lastErr, lastKind string
	// since is when the breaker opened.
	since time.Time
	// shownOpen: the broker, as the last reconcile read it, has the
	// Available condition that says its breaker is open, which a process
	// before this one (or another replica) may have left: a request this
	// process's closed breaker lets through and the broker answers clears
	// it, as no probe of this process will.
	shownOpen bool
}

// maxFailing bounds the objects a broker's gate keeps as failing. Past
// it, an object whose request failed is not kept: when the breaker
// closes, it waits out its own status-held backoff (at most --retry-cap)
// instead of being retried at once, as it would without a breaker.
const maxFailing = 4096

// lift is a backoff lifted until the next request of verb.
type lift struct {
	verb  string
	until time.Time
}

// liftFor is how long a closing breaker lifts an object's backoff at most.
const liftFor = 10 * time.Minute

// reservation is a slot handed to an object from the waiting line.
type reservation struct {
	g  *gate
	at time.Time
}

// gates are the bulkheads of every broker the engine has called.
type gates struct {
	c            *Controller
	max          int
	failureLimit int
	wait         time.Duration
	// ctx ends with the engine: probes and condition writes stop.
	ctx context.Context

	mu       sync.Mutex
	byID     map[string]*gate
	reserved map[objectKey]reservation
	// bypass are the objects whose status-held backoff a closing breaker
	// lifted, until their next request of the verb that failed first
	// (or any failure), for a while at most.
	bypass map[objectKey]lift

	// cluster are the metrics of the cluster's brokers, namespaced those
	// of namespaced brokers, which name their namespace (gate.m).
	cluster, namespaced *brokerMetrics
}

// brokerMetrics are the series of each broker's gate.
type brokerMetrics struct {
	inflight, waiting, circuit *prometheus.GaugeVec
	probes                     *prometheus.CounterVec
}

func newBrokerMetrics(reg prometheus.Registerer) *brokerMetrics {
	m := &brokerMetrics{
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bindery_controller_broker_inflight", Help: "Requests in flight to each broker from this engine (at most --broker-max-inflight).",
		}, []string{"broker"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bindery_controller_broker_waiting", Help: "Objects waiting for a slot of each broker, or for its breaker to close.",
		}, []string{"broker"}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bindery_controller_broker_circuit_open", Help: "1 while a broker's circuit breaker is open or half open: requests to it are held back.",
		}, []string{"broker"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bindery_controller_broker_probes_total", Help: "Probes (GET /v2/catalog) of brokers whose breaker is open, by result.",
		}, []string{"broker", "result"}),
	}
	reg.MustRegister(m.inflight, m.waiting, m.circuit, m.probes)
	return m
}

// forget drops the series of the broker named name.
func (m *brokerMetrics) forget(name string) {
	m.inflight.DeleteLabelValues(name)
	m.waiting.DeleteLabelValues(name)
	m.circuit.DeleteLabelValues(name)
	m.probes.DeletePartialMatch(prometheus.Labels{"broker": name})
}

// newGates returns the engine's gates. The series of namespaced brokers
// go to namespaced (reg when nil), those of the cluster's to reg.
func newGates(c *Controller, reg, namespaced prometheus.Registerer, maxInflight, failures int, wait time.Duration) *gates {
	gs := &gates{c: c, max: maxInflight, failureLimit: failures, wait: wait, ctx: context.Background(),
		byID: map[string]*gate{}, reserved: map[objectKey]reservation{}, bypass: map[objectKey]lift{},
		cluster: newBrokerMetrics(reg)}
	gs.namespaced = gs.cluster
	if namespaced != nil {
		gs.namespaced = newBrokerMetrics(namespaced)
	}
	return gs
}

// errBrokerBusy: every slot of the broker is taken; the object waits in
// line.
var errBrokerBusy = errors.New("every slot of the broker is taken")

// unavailableError: the broker's breaker is open; the object waits.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }

// get returns the gate of broker b. gs.mu is held.
func (gs *gates) get(b *catalog.Broker) *gate {
	g := gs.byID[b.ID]
	if g == nil {
		name := b.Name
		if b.Namespace != "" {
			name = b.Namespace + "/" + b.Name
		}
		g = &gate{id: b.ID, name: name, kind: catalog.Kind(b), namespace: b.Namespace, limit: gs.max, waiting: newFairLine(), parked: map[objectKey]bool{}, failing: map[objectKey]string{}, m: gs.cluster}
		if b.Namespace != "" {
			g.m = gs.namespaced
		}
		gs.byID[b.ID] = g
	}
	c, ok := catalog.FindCondition(b.Status.Conditions, catalog.ConditionAvailable)
	g.shownOpen = ok && c.Status == catalog.ConditionFalse
	return g
}

// enter takes a slot of broker b for the reconcile of ctx, which keeps it
// until its broker answers (leave) or it ends. errBrokerBusy or an
// *unavailableError say the object waits in the broker's line instead:
// it is queued again when its turn comes.
func (c *Controller) enter(ctx context.Context, b *catalog.Broker, cl *osb.Client) error {
	r := runOf(ctx)
	if r == nil || r.gate != nil {
		return nil
	}
	gs := c.gates
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.get(b)
	g.client = cl
	gs.fill(g)
	if res, ok := gs.reserved[r.key]; ok && res.g == g {
		delete(gs.reserved, r.key)
		r.gate = g
		return nil
	}
	switch {
	case g.open:
		gs.park(g, r.key)
		return &unavailableError{msg: g.waitMessage(gs.failureLimit)}
	case g.inflight < g.limit && g.waiting.len() == 0:
		g.inflight++
		r.gate = g
		g.m.inflight.WithLabelValues(g.name).Set(float64(g.inflight))
		return nil
	}
	gs.park(g, r.key)
	return errBrokerBusy
}

// waitMessage says why a broker's objects wait while its breaker is open.
func (g *gate) waitMessage(limit int) string {
	return fmt.Sprintf("%s %q is not answering: %d requests in a row failed or timed out (the last: %s). Requests to it wait until a probe of its catalogue succeeds.",
		g.kind, g.name, limit, g.lastKind)
}

// failureKind says what kind of failure err is, in words that stay the
// same from one failure of a kind to the next.
func failureKind(err error) string {
	var he *osb.HTTPError
	var me *osb.MalformedError
	switch {
	case errors.As(err, &he):
		return fmt.Sprintf("it answered %d", he.Status)
	case errors.As(err, &me):
		return fmt.Sprintf("it answered %d with a malformed body", me.Status)
	case osb.IsTimeout(err):
		return "no answer in time"
	}
	return "it could not be reached"
}

// fill hands g's free slots to the objects in line, if any are free
// while some wait (as after the breaker closed). gs.mu is held.
func (gs *gates) fill(g *gate) {
	for !g.open && g.inflight < g.limit {
		key, ok := gs.pop(g)
		if !ok {
			break
		}
		g.inflight++
		gs.reserve(g, key)
	}
	g.m.inflight.WithLabelValues(g.name).Set(float64(g.inflight))
}

// park puts key in g's waiting line. gs.mu is held.
func (gs *gates) park(g *gate, key objectKey) {
	if !g.parked[key] {
		g.parked[key] = true
		g.waiting.push(key)
		g.m.waiting.WithLabelValues(g.name).Set(float64(g.waiting.len()))
	}
}

// pop takes the next of g's waiting line. gs.mu is held.
func (gs *gates) pop(g *gate) (objectKey, bool) {
	key, ok := g.waiting.pop()
	if !ok {
		return objectKey{}, false
	}
	delete(g.parked, key)
	g.m.waiting.WithLabelValues(g.name).Set(float64(g.waiting.len()))
	return key, true
}

// handOff gives a slot of g that its holder is done with to the first
// object in line, or frees it. gs.mu is held.
func (gs *gates) handOff(g *gate) {
	if g.forgotten {
		g.inflight--
		return
	}
	if !g.open && g.inflight <= g.limit {
		if key, ok := gs.pop(g); ok {
			gs.reserve(g, key)
			return
		}
	}
	g.inflight--
	g.m.inflight.WithLabelValues(g.name).Set(float64(g.inflight))
}

// reserve hands a slot of g to key and queues it, before any other
// (turns). gs.mu is held.
func (gs *gates) reserve(g *gate, key objectKey) {
	gs.reserved[key] = reservation{g: g, at: time.Now()}
	gs.c.turns.handed(key)
	gs.c.queue.Add(key)
}

// leave gives back the slot r holds once its request was answered: the
// next in line gets it at once.
func (gs *gates) leave(r *run) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g := r.gate; g != nil {
		r.gate = nil
		gs.handOff(g)
	}
}

// finish ends the reconcile r in the bulkheads: the slot it holds goes on,
// and so does one handed to it that it did not use (unless it was handed
// while r ran: the reconcile queued by the handing-over takes it).
func (gs *gates) finish(r *run, started time.Time) {
	gs.leave(r)
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if res, ok := gs.reserved[r.key]; ok && res.at.Before(started) {
		delete(gs.reserved, r.key)
		gs.handOff(res.g)
	}
}

// forgetObject drops what the gates keep of an object that is gone
// (finalized, abandoned, removed by another replica): its place among
// its broker's failing objects and its lifted backoff. No request of its
// own would ever take them out.
func (gs *gates) forgetObject(key objectKey) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.bypass, key)
	for _, g := range gs.byID {
		delete(g.failing, key)
	}
}

// lift lifts key's backoff until its next request of verb.
func (gs *gates) lift(key objectKey, verb string) {
	gs.mu.Lock()
	gs.bypass[key] = lift{verb: verb, until: time.Now().Add(liftFor)}
	gs.mu.Unlock()
}

// lifted reports whether a closing breaker lifted key's backoff.
func (gs *gates) lifted(key objectKey) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	l, ok := gs.bypass[key]
	if ok && time.Now().After(l.until) {
		delete(gs.bypass, key)
		return false
	}
	return ok
}

// breakerFailure reports an outcome the breaker counts as a failure: no
// answer, or one that says the broker is in trouble.
func breakerFailure(err error) bool {
	if err == nil {
		return false
	}
	var he *osb.HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500 || he.Status == http.StatusTooManyRequests
	}
	// A malformed answer, a timeout, a refused connection.
	return true
}

// outcome counts the result of a request (of verb) of r to its broker.
func (gs *gates) outcome(r *run, verb string, err error) {
	g := r.gate
	if g == nil || errors.Is(err, context.Canceled) {
		return // the engine stopped, or the object was abandoned
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g.forgotten {
		return // its broker was deleted
	}
	first := verb
	if l, ok := gs.bypass[r.key]; ok && (l.verb == verb || breakerFailure(err)) {
		// Lifted until the request that failed first is made again; a
		// failure puts the object back among the failing, as it was.
		delete(gs.bypass, r.key)
		first = l.verb
	}
	if !breakerFailure(err) {
		if g.shownOpen && !g.open {
			g.shownOpen = false
			gs.record(g, true, "The broker answers again; the objects waiting for it are retried.")
		}
		g.failures, g.opens, g.probation = 0, 0, false
		// Answered, whatever the verb: its backoff is the broker's
		// answer's, not the outage's. (A lift stays until the request
		// of the verb that failed first, above: an orphan mitigation's
		// deprovision may come before it.)
		delete(g.failing, r.key)
		if g.limit < gs.max {
			g.limit = min(gs.max, 2*g.limit)
			gs.fill(g)
		}
		return
	}
	g.failures++
	if _, ok := g.failing[r.key]; !ok && len(g.failing) < maxFailing {
		g.failing[r.key] = first
	}
	g.lastErr, g.lastKind = shorten(err.Error(), 300), failureKind(err)
	g.limit = max(1, g.limit/2)
	if !g.open && (g.probation || g.failures >= gs.failureLimit) {
		gs.open(g)
	}
}

// open opens g's breaker and schedules its probe. gs.mu is held.
func (gs *gates) open(g *gate) {
	g.since = time.Now()
	g.open = true
	g.opens++
	g.failures = 0
	g.m.circuit.WithLabelValues(g.name).Set(1)
	msg := fmt.Sprintf("%d requests in a row failed or timed out (the last: %s); requests to the broker wait until a probe of its catalogue succeeds.",
		gs.failureLimit, g.lastErr)
	gs.c.log.Warn("broker not answering: its circuit breaker is open", "broker", g.name, "openings", g.opens, "last", g.lastErr)
	gs.record(g, false, msg)
	gs.schedule(g)
}

// schedule probes g after the breaker's wait. gs.mu is held.
func (gs *gates) schedule(g *gate) {
	d := gs.wait
	for i := 1; i < g.opens && d < breakerWaitCap; i++ {
		d *= 2
	}
	d = min(d, breakerWaitCap)
	d -= time.Duration(float64(d) * jitterShare * rand.Float64())
	time.AfterFunc(d, func() { gs.probe(g) })
}

// probe asks the broker's catalogue whether it answers again, unless the
// broker was deleted meanwhile (its deletion may have gone past this
// process unseen, as when the change feed was pruned before it was read):
// a deleted broker is forgotten instead, and probed no more.
func (gs *gates) probe(g *gate) {
	if gs.ctx.Err() != nil {
		return
	}
	gs.mu.Lock()
	cl, forgotten := g.client, g.forgotten
	gs.mu.Unlock()
	if forgotten {
		return
	}
	ctx, cancel := context.WithTimeout(gs.ctx, min(probeTimeout, gs.c.timeout))
	_, err := gs.c.store.Store.GetBrokerIn(ctx, g.namespace, g.id)
	if errors.Is(err, catalog.ErrNotFound) {
		cancel()
		gs.forget(g.id)
		return
	}
	err = cl.Probe(ctx)
	cancel()
	if gs.ctx.Err() != nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g.forgotten {
		return
	}
	if err != nil {
		g.m.probes.WithLabelValues(g.name, "failed").Inc()
		g.opens++
		g.lastErr, g.lastKind = shorten(err.Error(), 300), failureKind(err)
		gs.schedule(g)
		return
	}
	g.m.probes.WithLabelValues(g.name, "ok").Inc()
	// The objects the outage kept in their backoff join the line (and
	// lifts nobody used, of objects gone meanwhile, are forgotten).
	now := time.Now()
	for key, l := range gs.bypass {
		if now.After(l.until) {
			delete(gs.bypass, key)
		}
	}
	until := now.Add(liftFor)
	for key, verb := range g.failing {
		gs.park(g, key)
		gs.bypass[key] = lift{verb: verb, until: until}
	}
	clear(g.failing)
	gs.close(g)
}

// forget drops the gate of broker id, which was deleted: its probes
// stop, its metric series go, and the objects in its line are queued, to
// find their broker gone. A reconcile holding one of its slots gives it
// back to nobody.
func (gs *gates) forget(id string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.byID[id]
	if g == nil {
		return
	}
	delete(gs.byID, id)
	g.forgotten = true
	for key, res := range gs.reserved {
		if res.g == g {
			delete(gs.reserved, key)
			gs.c.queue.Add(key)
		}
	}
	for key := range g.parked {
		gs.c.queue.Add(key)
	}
	clear(g.parked)
	g.waiting = newFairLine()
	clear(g.failing)
	g.m.forget(g.name)
}

// close closes g's breaker and hands it to the objects in line, their
// backoff lifted, one slot first. gs.mu is held.
func (gs *gates) close(g *gate) {
	g.open, g.probation, g.failures, g.limit = false, true, 0, 1
	g.m.circuit.WithLabelValues(g.name).Set(0)
	gs.c.log.Info("broker answers again: its circuit breaker is closed", "broker", g.name, "open for", time.Since(g.since).Round(time.Second))
	gs.record(g, true, fmt.Sprintf("The broker answers again, after %s; the objects waiting for it are retried.", time.Since(g.since).Round(time.Second)))
	gs.fill(g)
}

// record writes the breaker's state into the broker's Available
// condition, beside the engine's work. gs.mu is held.
func (gs *gates) record(g *gate, available bool, msg string) {
	id := g.id
	go func() {
		ctx, cancel := context.WithTimeout(gs.ctx, 10*time.Second)
		defer cancel()
		if err := gs.c.store.Store.SetBrokerAvailable(ctx, id, available, msg); err != nil && ctx.Err() == nil {
			gs.c.log.Warn("record a broker's circuit breaker", "broker", g.name, "error", err)
		}
	}()
}

// shorten cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
