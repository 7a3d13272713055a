package wait

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/internal/backofftest"
)

// TestFollowBacksOffAndReportsFailure: a server that answers "working"
// twice and then "failed"; Follow polls with growing delays, prints one
// line per change and ends with ErrFailed and the server's words. The
// spinner on a terminal does not add polls.
func TestFollowBacksOffAndReportsFailure(t *testing.T) {
	t.Parallel()
	for _, terminal := range []bool{false, true} {
		var polls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := polls.Add(1)
			obj := map[string]any{"progress": map[string]any{"state": "working", "message": "The broker is provisioning it."}}
			if n >= 3 {
				obj["progress"] = map[string]any{"state": "failed", "reason": "ClusterServiceBrokerReturnedFailure",
					"message": "The broker failed the provision.", "detail": "the broker said: quota exceeded"}
			}
			_ = json.NewEncoder(w).Encode(obj)
		}))
		defer srv.Close()
		var out bytes.Buffer
		start := time.Now()
		_, err := Follow(context.Background(), Options{Client: api.New(srv.URL, "t"), Path: "/instances/x", Out: &out, What: "instance team/db",
			Terminal: terminal, First: 100 * time.Millisecond, Max: time.Second})
		if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "instance team/db failed after") || !strings.Contains(err.Error(), "quota exceeded") {
			t.Fatalf("terminal=%v: err %v", terminal, err)
		}
		if polls.Load() != 3 {
			t.Errorf("terminal=%v: %d polls, want 3", terminal, polls.Load())
		}
		// Pauses of at least 100ms and 200ms.
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("terminal=%v: three polls in %s: no backoff", terminal, d)
		}
		if !strings.Contains(out.String(), "The broker is provisioning it. (") {
			t.Errorf("terminal=%v: progress:\n%q", terminal, out.String())
		}
		if !terminal && strings.Count(out.String(), "provisioning it") != 1 {
			t.Errorf("one line per change, got:\n%s", out.String())
		}
	}
}

// TestFollowTimesOutInWords: the timeout ends the wait with what was
// still going on, not Go's "context deadline exceeded".
func TestFollowTimesOutInWords(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"progress": map[string]any{"state": "retrying", "message": "Bindery could not reach the broker; it tries again."}})
	}))
	defer srv.Close()
	var out bytes.Buffer
	_, err := Follow(context.Background(), Options{Client: api.New(srv.URL, "t"), Path: "/instances/x", Out: &out, What: "instance team/db",
		Timeout: 300 * time.Millisecond, First: 50 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) || strings.Contains(err.Error(), "deadline") ||
		!strings.Contains(err.Error(), "stopped waiting for instance team/db after") || !strings.Contains(err.Error(), "could not reach the broker") {
		t.Fatalf("err %v", err)
	}
}

// TestPauses: the default pauses between polls start at about 200ms, never
// pass 5s, and are jittered.
func TestPauses(t *testing.T) {
	t.Parallel()
	o := Options{}
	o.defaults()
	backofftest.Check(t, o.pauses(), 250*time.Millisecond, 5*time.Second)
}

// TestFollowRidesOutAnUnavailableServer: between "working" and "ready"
// the server fails one poll, as during a database failover, a flood of
// requests or a dropped connection. The wait goes on (it gave up on the
// first such answer, exit 1, while the operation went on), after the
// pause Retry-After asks for, and says so on its progress lines. An
// answer of 4xx other than 429 still ends it.
func TestFollowRidesOutAnUnavailableServer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		fail       func(w http.ResponseWriter)
		retried    bool
		retryAfter time.Duration
	}{
		{"503 with Retry-After", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"unavailable","message":"The database is unavailable."}`))
		}, true, time.Second},
		{"429", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTooManyRequests) }, true, 0},
		{"500", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }, true, 0},
		{"the connection dropped mid-answer", func(w http.ResponseWriter) {
			// Half an answer: Go's transport sends a request again by
			// itself only when nothing came back on a reused connection.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"progress\""))
				_ = conn.Close()
			}
		}, true, 0},
		{"403", func(w http.ResponseWriter) { w.WriteHeader(http.StatusForbidden) }, false, 0},
		{"400", func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) }, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var polls atomic.Int32
			var failedAt atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				obj := map[string]any{"progress": map[string]any{"state": "working", "message": "The broker is provisioning it."}}
				switch polls.Add(1) {
				case 2:
					failedAt.Store(time.Now().UnixNano())
					c.fail(w)
					return
				case 3:
					obj["progress"] = map[string]any{"state": "ready", "message": "The instance is provisioned."}
					if d := time.Since(time.Unix(0, failedAt.Load())); d < c.retryAfter {
						t.Errorf("polled again %s after the failure, before its Retry-After of %s", d, c.retryAfter)
					}
				}
				_ = json.NewEncoder(w).Encode(obj)
			}))
			defer srv.Close()
			var out bytes.Buffer
			_, err := Follow(context.Background(), Options{Client: api.New(srv.URL, "t"), Path: "/instances/x", Out: &out,
				What: "instance team/db", Timeout: 30 * time.Second, First: 10 * time.Millisecond, Max: 50 * time.Millisecond})
			switch {
			case c.retried && (err != nil || polls.Load() != 3):
				t.Fatalf("after %d polls: %v; want the wait to go on past the failure and end ready", polls.Load(), err)
			case c.retried && !strings.Contains(out.String(), "trying again"):
				t.Errorf("progress does not say the poll failed and is tried again:\n%s", out.String())
			case !c.retried && (err == nil || polls.Load() != 2):
				t.Fatalf("after %d polls: %v; want the wait to end on the failure", polls.Load(), err)
			}
		})
	}
}
