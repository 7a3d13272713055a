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
)

// TestFollowBacksOffAndReportsFailure: a server that answers "Provision in
// progress" twice and then a Failed condition; Follow polls with growing
// delays, prints one line per operation and ends with ErrFailed and the
// broker's message. The spinner on a terminal does not add polls.
func TestFollowBacksOffAndReportsFailure(t *testing.T) {
	t.Parallel()
	for _, terminal := range []bool{false, true} {
		var polls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := polls.Add(1)
			obj := map[string]any{"generation": 1, "status": map[string]any{"currentOperation": "Provision", "reconciledGeneration": 0}}
			if n >= 3 {
				obj["status"] = map[string]any{"reconciledGeneration": 1, "conditions": []any{
					map[string]any{"type": "Ready", "status": "False", "reason": "ProvisionCallFailed", "message": "the broker said: quota exceeded"},
					map[string]any{"type": "Failed", "status": "True", "reason": "ProvisionCallFailed", "message": "the broker said: quota exceeded"},
				}}
			}
			_ = json.NewEncoder(w).Encode(obj)
		}))
		defer srv.Close()
		var out bytes.Buffer
		start := time.Now()
		_, err := Follow(context.Background(), Options{Client: api.New(srv.URL, "t"), Path: "/instances/x", Out: &out,
			Terminal: terminal, First: 200 * time.Millisecond, Max: time.Second})
		if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "quota exceeded") {
			t.Fatalf("terminal=%v: err %v", terminal, err)
		}
		if polls.Load() != 3 {
			t.Errorf("terminal=%v: %d polls, want 3", terminal, polls.Load())
		}
		// Delays of at least 100ms and 200ms (half of 200ms and 400ms).
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("terminal=%v: three polls in %s: no backoff", terminal, d)
		}
		if !strings.Contains(out.String(), "Provision (") || !strings.Contains(out.String(), "failed after") {
			t.Errorf("terminal=%v: progress:\n%q", terminal, out.String())
		}
		if !terminal && strings.Count(out.String(), "Provision (") != 1 {
			t.Errorf("one line per operation, got:\n%s", out.String())
		}
	}
}
