package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/labstack/echo/v4"
)

// TestMarketBuildOutlivesItsRequester: the marketplace's view is built
// once for the requests that miss together; the first of them leaving
// (its context cancelled) neither cancels the build nor fails the others,
// who get the view built, while it gets its own context's error at once.
func TestMarketBuildOutlivesItsRequester(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m marketCache
		release := make(chan struct{})
		var builds atomic.Int32
		build := func(ctx context.Context) (*marketView, error) {
			builds.Add(1)
			select {
			case <-release:
				return &marketView{Total: 7}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		first, leave := context.WithCancel(t.Context())
		firstErr := make(chan error, 1)
		go func() {
			_, err := m.view(first, 1, marketKey{}, build)
			firstErr <- err
		}()
		synctest.Wait() // the first request's build is under way
		var got *marketView
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err = m.view(t.Context(), 1, marketKey{}, build)
		}()
		synctest.Wait() // the second waits for the same build
		leave()
		if err := <-firstErr; !errors.Is(err, context.Canceled) {
			t.Errorf("the request that left got %v", err)
		}
		close(release)
		<-done
		if err != nil || got == nil || got.Total != 7 {
			t.Fatalf("the request that stayed got %+v, %v", got, err)
		}
		if n := builds.Load(); n != 1 {
			t.Errorf("%d builds for one view", n)
		}
	})
}

// TestFailCancelled: an error that is context.Canceled means that the
// client left only when the request's own context is done; otherwise (a
// build shared with a request that left, say) it is a failure like any
// other, answered with an error page, not an empty 200.
func TestFailCancelled(t *testing.T) {
	s := New(nil, nil)
	e := echo.New()
	for _, tc := range []struct {
		name   string
		left   bool
		status int
	}{
		{"the client stayed", false, http.StatusInternalServerError},
		{"the client left", true, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.left {
				cancel()
			}
			rec := httptest.NewRecorder()
			c := e.NewContext(httptest.NewRequestWithContext(ctx, "GET", "/", nil), rec)
			if err := s.fail(c, context.Canceled); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status || (tc.left != (rec.Body.Len() == 0)) {
				t.Errorf("answered %d with %d bytes", rec.Code, rec.Body.Len())
			}
			if !tc.left && !strings.Contains(rec.Body.String(), "Something went wrong") {
				t.Errorf("the page says %q", rec.Body.String())
			}
		})
	}
}
