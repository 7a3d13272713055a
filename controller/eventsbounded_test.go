package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// heldEvents holds every write of an Event until its request's context
// ends, while on, and counts the writes held at once.
type heldEvents struct {
	rt          http.RoundTripper
	on          *atomic.Bool
	mu          sync.Mutex
	held, most  int
	longest     time.Duration
	passedAfter atomic.Int64
}

func (h *heldEvents) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.Path, "/events") || req.Method == http.MethodGet {
		return h.rt.RoundTrip(req)
	}
	if !h.on.Load() {
		h.passedAfter.Add(1)
		return h.rt.RoundTrip(req)
	}
	start := time.Now()
	h.mu.Lock()
	h.held++
	h.most = max(h.most, h.held)
	h.mu.Unlock()
	<-req.Context().Done()
	h.mu.Lock()
	h.held--
	h.longest = max(h.longest, time.Since(start))
	h.mu.Unlock()
	return nil, req.Context().Err()
}

// TestEventWritesBounded: against a kube-apiserver that never answers the
// writes of Events, the engine's Events give each write up after their
// timeout and keep at most 16 under way, instead of one held for good per
// Event (client-go's broadcaster writes each from a goroutine of its own,
// with no deadline); once it answers again, new Events reach it.
func TestEventWritesBounded(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	on := &atomic.Bool{}
	on.Store(true)
	held := &heldEvents{on: on}
	cfg := cluster.Config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { held.rt = rt; return held }
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events := controller.NewEvents(kube, time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := events.Start(ctx); err != nil {
		t.Fatal(err)
	}
	publish := func(n int, reason string) {
		for i := range n {
			events.Publish([]catalog.ObjectEvent{{Name: fmt.Sprintf("db-%d", i), Namespace: "default",
				Event: catalog.Event{Kind: "ServiceInstance", ObjectID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Type: "Normal", Reason: reason, Message: "m"}}})
		}
	}
	publish(100, "Stalled")
	time.Sleep(4 * time.Second)
	held.mu.Lock()
	most, longest := held.most, held.longest
	held.mu.Unlock()
	if most > 16 || longest > 3*time.Second {
		t.Errorf("%d Event writes held at once, the longest for %s; want at most 16, each given up after 1 s", most, longest.Round(time.Millisecond))
	}
	on.Store(false)
	publish(1, "Answered")
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := kube.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ev := range list.Items {
			found = found || ev.Reason == "Answered"
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an Event published once kube-apiserver answered did not reach it in 30 s (%d writes passed)", held.passedAfter.Load())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
