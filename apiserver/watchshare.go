package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// DefaultMaxWatchesPerUser is how many watches one user may hold open at
// once unless told otherwise.
const DefaultMaxWatchesPerUser = 500

// watchShare bounds the watches one user holds open at once. A watch is
// a request that lasts: it counts against no bound of k8s.io/apiserver's
// (requests in flight leave long-running ones out, and API Priority and
// Fairness counts only a watch's start), yet each one is held by the
// server and looked at for every change of its kind, so one user's
// thousands would slow every other watcher's events. Past the bound a
// watch is answered 429 with Retry-After, which client-go's reflectors
// back off on. system:masters, exempt from Priority and Fairness too, is
// not bounded.
type watchShare struct {
	max  int // <= 0: no bound
	mu   sync.Mutex
	open map[string]int
}

func newWatchShare(bound int) *watchShare {
	return &watchShare{max: bound, open: map[string]int{}}
}

// wrap runs inside the filter chain, after authentication.
func (s *watchShare) wrap(next http.Handler) http.Handler {
	if s.max <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		who, known := genericapirequest.UserFrom(req.Context())
		if !ok || info.Verb != "watch" || !known || slices.Contains(who.GetGroups(), user.SystemPrivilegedGroup) {
			next.ServeHTTP(w, req)
			return
		}
		name := who.GetName()
		if !s.take(name) {
			err := apierrors.NewTooManyRequests(fmt.Sprintf("user %q has %d watches open, the most one user may hold (--max-watches-per-user): close one, or retry later", name, s.max), 1)
			responsewriters.ErrorNegotiated(err, codecs, v1beta1.SchemeGroupVersion, w, req)
			return
		}
		defer s.give(name)
		next.ServeHTTP(w, req)
	})
}

func (s *watchShare) take(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[name] >= s.max {
		return false
	}
	s.open[name]++
	return true
}

func (s *watchShare) give(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[name]--; s.open[name] <= 0 {
		delete(s.open, name)
	}
}
