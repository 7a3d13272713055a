package restapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxInflightPerToken is how many requests one API token may have
// served at once unless set otherwise. With a flood of 200 concurrent
// lists from one token on 2 cores, another token's requests took p50 102
// ms at 8 (61 ms at 4, 272 ms at 16, 11.8 s unbounded) while the flood's
// own rate stayed that of no bound.
const DefaultMaxInflightPerToken = 8

// waitingPerSlot is how many requests of a token may wait for each of its
// slots: waiting costs a connection and a goroutine, not the database.
const waitingPerSlot = 4

// shareWait is the longest a request waits for one of its token's slots.
const shareWait = 10 * time.Second

// share bounds what one token (one party: a team, a pipeline, a script)
// takes of the server: at most max of its requests are served at once;
// waitingPerSlot times as many more wait their turn, up to shareWait each,
// holding nothing but their connection; beyond that a request is answered
// 429 at once. All of
// it happens before the request's body is read or the database is asked
// anything, so one party's flood leaves the database pool and the cores
// to the others. Only tokens with requests served or waiting have a
// record.
type share struct {
	max int // 0: no bound

	mu      sync.Mutex
	tokens  map[string]*tokenShare
	refused prometheus.Counter
}

// tokenShare is one token's slots and the requests that hold or wait for
// one.
type tokenShare struct {
	slots chan struct{}
	users int
}

func newShare(max int) *share {
	return &share{max: max, tokens: map[string]*tokenShare{}, refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "bindery_api_token_requests_refused_total",
		Help: "REST requests answered 429 because their token had as many requests served and waiting as it may have.",
	})}
}

// acquire takes one of the token's slots, waiting for one up to shareWait
// (or ctx's end) when they are all taken and fewer than waitingPerSlot
// times max requests wait. It returns nil when no slot was had.
func (s *share) acquire(ctx context.Context, token string) *tokenShare {
	s.mu.Lock()
	t := s.tokens[token]
	if t == nil {
		t = &tokenShare{slots: make(chan struct{}, s.max)}
		s.tokens[token] = t
	}
	if t.users >= (1+waitingPerSlot)*s.max {
		s.mu.Unlock()
		return nil
	}
	t.users++
	s.mu.Unlock()
	timer := time.NewTimer(shareWait)
	defer timer.Stop()
	select {
	case t.slots <- struct{}{}:
		return t
	case <-timer.C:
	case <-ctx.Done():
	}
	s.leave(token, t)
	return nil
}

// release gives back a slot acquire took.
func (s *share) release(token string, t *tokenShare) {
	<-t.slots
	s.leave(token, t)
}

// leave counts a request out of the token's users, dropping the token's
// record with its last one.
func (s *share) leave(token string, t *tokenShare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.users--; t.users == 0 {
		delete(s.tokens, token)
	}
}

// serve runs next as one of the token's requests served at once, or
// answers 429 when the token has its share served and waiting.
func (s *share) serve(c echo.Context, token string, next echo.HandlerFunc) error {
	if s.max <= 0 {
		return next(c)
	}
	t := s.acquire(c.Request().Context(), token)
	if t == nil {
		s.refused.Inc()
		c.Response().Header().Set("Retry-After", "1")
		return apiError(http.StatusTooManyRequests, "too_many_requests",
			"This token has %s requests being served and %s waiting, the most one token may have; send the next once one is answered.",
			strconv.Itoa(s.max), strconv.Itoa(waitingPerSlot*s.max))
	}
	defer s.release(token, t)
	return next(c)
}

var (
	tokenRequestsDesc = prometheus.NewDesc("bindery_api_token_requests",
		"REST requests being served (state in_flight) and waiting for a slot of their token (state waiting).", []string{"state"}, nil)
)

func (s *share) Describe(ch chan<- *prometheus.Desc) {
	ch <- tokenRequestsDesc
	s.refused.Describe(ch)
}

// Collect counts the requests of every token: those holding a slot are
// served, the others wait for one.
func (s *share) Collect(ch chan<- prometheus.Metric) {
	inflight, waiting := 0, 0
	s.mu.Lock()
	for _, t := range s.tokens {
		served := len(t.slots)
		inflight += served
		waiting += max(0, t.users-served)
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(tokenRequestsDesc, prometheus.GaugeValue, float64(inflight), "in_flight")
	ch <- prometheus.MustNewConstMetric(tokenRequestsDesc, prometheus.GaugeValue, float64(waiting), "waiting")
	s.refused.Collect(ch)
}
