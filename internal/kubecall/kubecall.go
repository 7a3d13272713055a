// Package kubecall holds the one rule for the requests Bindery's
// processes make to kube-apiserver: each single request is bounded (a
// list or a watch of an informer excepted, which lasts minutes by
// design). Reconciles, admission lookups and installers have no deadline
// of their own, and client-go none by default, so a request that a lost
// connection or a stuck kube-apiserver never answers would hold its
// worker, or its command, for good.
package kubecall

import (
	"errors"
	"time"
)

// DefaultTimeout is the bound of the engine, the servicebinding.io
// webhook and controller, and `bindery up`'s installer and `bindery down`.
// kube-apiserver ends a request it cannot serve after a minute by default
// (its --request-timeout), most far sooner: 30 s cuts a request that is
// lost, not one that is slow.
const DefaultTimeout = 30 * time.Second

// DelegatedTimeout is the bound of the aggregated API server's own
// requests (TokenReviews, discovery, admission's lookups), each made while
// a client of the server waits: 10 s, as k8s.io/apiserver bounds the
// TokenReviews and SubjectAccessReviews it delegates.
const DelegatedTimeout = 10 * time.Second

// Flag is the name of the command-line flag that sets a component's bound.
const Flag = "kube-request-timeout"

// Validate returns the error, naming Flag, of a bound that is not
// positive: a flag of 0 could be read as "no bound", which the rule does
// not allow.
func Validate(d time.Duration) error {
	if d <= 0 {
		return errors.New("--" + Flag + ": must be positive")
	}
	return nil
}
