// Package share bounds what one party (an API token: a team, a pipeline,
// a script) takes of a server that many share: at most Max of its
// requests are served at once, WaitingPerSlot times as many more wait
// their turn in order, up to Wait each, holding nothing but their
// connection, and beyond that a request is refused at once; and it may
// hold at most StreamsPerSlot times Max long-lived streams open. A door
// takes a slot right after it has checked the party, before it reads a
// body or asks the database anything, so one party's flood leaves the
// database pool and the cores to the others. The REST API and the web UI
// take from one Share: a token is one party whichever door it uses.
package share

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMax is how many requests one party may have served at once
// unless set otherwise. With a flood of 200 concurrent lists from one
// token on 2 cores, another token's requests took p50 102 ms at 8 (61 ms
// at 4, 272 ms at 16, 11.8 s unbounded) while the flood's own rate stayed
// that of no bound.
const DefaultMax = 8

// WaitingPerSlot is how many requests of a party may wait for each of its
// slots: waiting costs a connection and a goroutine, not the database.
const WaitingPerSlot = 4

// Wait is the longest a request waits for one of its party's slots.
const Wait = 10 * time.Second

// StreamsPerSlot is how many streams (the web UI's live pages) a party
// may hold open for each of its slots. A stream holds no slot: it is
// served for as long as a page is open, and renders a page again for
// each change it shows.
const StreamsPerSlot = 4

// Share is the bound on every party's requests. A nil Share, or one of
// Max 0, bounds nothing.
type Share struct {
	max int

	mu      sync.Mutex
	parties map[string]*party
	refused prometheus.Counter
}

// party is one party's slots, the requests that hold or wait for one,
// and its open streams.
type party struct {
	slots   chan struct{}
	users   int
	streams int
}

// New returns a Share of max requests served at once per party (0: no
// bound).
func New(max int) *Share {
	return &Share{max: max, parties: map[string]*party{}, refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bindery_api_token_requests_refused_total",
		Help: "Requests (REST and web UI) answered 429 because their token had as many requests served and waiting, or streams open, as it may have.",
	})}
}

// Max is how many requests a party may have served at once (0: no
// bound).
func (s *Share) Max() int {
	if s == nil {
		return 0
	}
	return s.max
}

// get returns name's record, made if need be. s.mu is held.
func (s *Share) get(name string) *party {
	p := s.parties[name]
	if p == nil {
		p = &party{slots: make(chan struct{}, s.max)}
		s.parties[name] = p
	}
	return p
}

// Acquire takes one of the party's slots, waiting for one up to Wait (or
// ctx's end) when they are all taken and fewer than WaitingPerSlot times
// Max requests wait. It returns the function that gives the slot back, or
// nil when no slot was had: the request is to be refused.
func (s *Share) Acquire(ctx context.Context, name string) (release func()) {
	return s.acquire(ctx, name, true)
}

// AcquireQueued is Acquire for the parts of a page a browser asks for all
// at once (the marketplace's icons, up to 100 of them): it waits for a
// slot however many requests of the party wait, so that a page's parts are
// served in turn instead of refused. It still waits Wait at most.
func (s *Share) AcquireQueued(ctx context.Context, name string) (release func()) {
	return s.acquire(ctx, name, false)
}

func (s *Share) acquire(ctx context.Context, name string, capped bool) (release func()) {
	if s.Max() <= 0 {
		return func() {}
	}
	s.mu.Lock()
	p := s.get(name)
	if capped && p.users >= (1+WaitingPerSlot)*s.max {
		s.mu.Unlock()
		s.refused.Inc()
		return nil
	}
	p.users++
	s.mu.Unlock()
	timer := time.NewTimer(Wait)
	defer timer.Stop()
	select {
	case p.slots <- struct{}{}:
		return func() {
			<-p.slots
			s.leave(name, p, func() { p.users-- })
		}
	case <-timer.C:
	case <-ctx.Done():
	}
	s.leave(name, p, func() { p.users-- })
	s.refused.Inc()
	return nil
}

// Open counts a stream of the party open, if it has fewer than
// StreamsPerSlot times Max. It returns the function that counts it
// closed, or nil when the stream is to be refused.
func (s *Share) Open(name string) (closed func()) {
	if s.Max() <= 0 {
		return func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.get(name)
	if p.streams >= StreamsPerSlot*s.max {
		s.refused.Inc()
		return nil
	}
	p.streams++
	return func() { s.leave(name, p, func() { p.streams-- }) }
}

// leave counts a request or stream out of the party, with done, dropping
// the party's record with its last one.
func (s *Share) leave(name string, p *party, done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	done()
	if p.users == 0 && p.streams == 0 {
		delete(s.parties, name)
	}
}

var requestsDesc = prometheus.NewDesc("bindery_api_token_requests",
	"Requests (REST and web UI) being served (state in_flight), waiting for a slot of their token (state waiting), and the web UI's live streams open (state streaming).",
	[]string{"state"}, nil)

// Describe and Collect make the Share a Prometheus collector.
func (s *Share) Describe(ch chan<- *prometheus.Desc) {
	ch <- requestsDesc
	s.refused.Describe(ch)
}

// Collect counts the requests of every party: those holding a slot are
// served, the others wait for one.
func (s *Share) Collect(ch chan<- prometheus.Metric) {
	inflight, waiting, streams := 0, 0, 0
	s.mu.Lock()
	for _, p := range s.parties {
		served := len(p.slots)
		inflight += served
		waiting += max(0, p.users-served)
		streams += p.streams
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.GaugeValue, float64(inflight), "in_flight")
	ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.GaugeValue, float64(waiting), "waiting")
	ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.GaugeValue, float64(streams), "streaming")
	s.refused.Collect(ch)
}
