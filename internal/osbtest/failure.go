package osbtest

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Verb names an OSB endpoint, for failure injection, counters and the
// request log.
type Verb string

// The OSB endpoints. VerbUnknown is any other path.
const (
	VerbCatalog              Verb = "catalog"                // GET /v2/catalog
	VerbProvision            Verb = "provision"              // PUT /v2/service_instances/:instance_id
	VerbUpdate               Verb = "update"                 // PATCH /v2/service_instances/:instance_id
	VerbDeprovision          Verb = "deprovision"            // DELETE /v2/service_instances/:instance_id
	VerbFetchInstance        Verb = "fetch_instance"         // GET /v2/service_instances/:instance_id
	VerbLastOperation        Verb = "last_operation"         // GET /v2/service_instances/:instance_id/last_operation
	VerbBind                 Verb = "bind"                   // PUT .../service_bindings/:binding_id
	VerbUnbind               Verb = "unbind"                 // DELETE .../service_bindings/:binding_id
	VerbFetchBinding         Verb = "fetch_binding"          // GET .../service_bindings/:binding_id
	VerbBindingLastOperation Verb = "binding_last_operation" // GET .../service_bindings/:binding_id/last_operation
	VerbUnknown              Verb = "unknown"
)

// Failure is a misbehaviour injected into the answers to one Verb with
// Broker.Fail. Its kinds, by the fields set:
//
//   - Status 4xx or 5xx: that status with an OSB error body built from Code,
//     Description, InstanceUsable and UpdateRepeatable (or Body, if set). The
//     request is not carried out, as the spec requires of 4xx and recommends
//     for 5xx.
//   - Status 2xx: the request is carried out, then answered with that status
//     and Body as it is, such as "{" for the "201 with malformed response"
//     rows of the orphan-mitigation table, or nothing (as for "204").
//   - Delay: the answer is held back that long, or until the client gives
//     up. Without Status the request is carried out first, so a client that
//     times out leaves the resource behind, as with a slow broker.
//   - AsyncFailed (provision, update, deprovision, bind, unbind only): the
//     operation is accepted with 202 even on a synchronous plan and ends
//     "failed", with Description, and InstanceUsable and UpdateRepeatable
//     where the spec allows them. Without accepts_incomplete=true the request
//     gets 422 AsyncRequired.
//   - NeverFinishes (the same verbs): the operation is accepted with 202 as
//     with AsyncFailed, and every poll answers "in progress" — until a
//     delete request halts it, as the spec says of a provision, update or
//     bind.
//   - RetryAfter, with a 4xx or 5xx Status: the answer carries a
//     Retry-After header (whole seconds, rounded up), as HTTP allows on
//     503 and 429 and brokers send with 422 ConcurrencyError.
//   - After, with AsyncFailed: the operation fails once that long has
//     passed since it started, however often it is polled meanwhile (as
//     a broker whose backend gives up after a few seconds), instead of
//     after the polls WithPolls sets.
//
// A broker that is down (connection refused) is Broker.Down.
type Failure struct {
	Status           int
	Code             string // the OSB error code, such as "ConcurrencyError" or "AsyncRequired"
	Description      string
	InstanceUsable   *bool // update and deprovision only
	UpdateRepeatable *bool // update only
	Body             string
	Delay            time.Duration
	// Until, when not nil, holds the answer back (after Delay) until it
	// is closed: a broker that answers when the test says.
	Until         <-chan struct{}
	AsyncFailed   bool
	NeverFinishes bool
	RetryAfter    time.Duration
	After         time.Duration
	// Describe, when set, gives the description of each answer in place
	// of Description, called once per answer: a broker whose error text
	// changes every time (and may be as long as it likes).
	Describe func() string
	// Times is how many requests the failure applies to; 0 means every
	// request until Clear.
	Times int
}

// mutating are the verbs that start operations.
var mutating = map[Verb]bool{VerbProvision: true, VerbUpdate: true, VerbDeprovision: true, VerbBind: true, VerbUnbind: true}

// Fail makes the next requests for v (ones that pass authentication and the
// version check) misbehave as f says. Failures for one verb queue up: each
// applies to its Times requests in the order given. A failure that makes no
// sense fails the test.
func (b *Broker) Fail(v Verb, f Failure) {
	b.t.Helper()
	switch {
	case f.Times < 0:
		b.t.Errorf("osbtest: Fail(%s): negative Times", v)
	case f.Status == 0 && f.Delay == 0 && f.Until == nil && !f.AsyncFailed && !f.NeverFinishes:
		b.t.Errorf("osbtest: Fail(%s): set Status, Delay, Until, AsyncFailed or NeverFinishes", v)
	case f.Status != 0 && (f.Status < 200 || f.Status > 599):
		b.t.Errorf("osbtest: Fail(%s): status %d", v, f.Status)
	case (f.AsyncFailed || f.NeverFinishes) && (f.Status != 0 || !mutating[v]):
		b.t.Errorf("osbtest: Fail(%s): AsyncFailed and NeverFinishes need a provision, update, deprovision, bind or unbind, and no Status", v)
	case f.After != 0 && (!f.AsyncFailed || f.After < 0):
		b.t.Errorf("osbtest: Fail(%s): After needs AsyncFailed and a positive duration", v)
	case f.AsyncFailed && f.NeverFinishes:
		b.t.Errorf("osbtest: Fail(%s): an operation cannot both fail and never finish", v)
	case f.RetryAfter != 0 && (f.Status < 400 || f.RetryAfter < 0):
		b.t.Errorf("osbtest: Fail(%s): RetryAfter needs an error Status and a positive duration", v)
	case f.InstanceUsable != nil && v != VerbUpdate && v != VerbDeprovision:
		b.t.Errorf("osbtest: Fail(%s): the spec allows instance_usable for update and deprovision only", v)
	case f.UpdateRepeatable != nil && v != VerbUpdate:
		b.t.Errorf("osbtest: Fail(%s): the spec allows update_repeatable for update only", v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures[v] = append(b.failures[v], f)
}

// Clear removes the failures queued for v.
func (b *Broker) Clear(v Verb) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failures, v)
}

// takeFailure returns the failure that applies to this request for v, if
// any, using up one of its Times. b.mu is held.
func (b *Broker) takeFailure(v Verb) *Failure {
	q := b.failures[v]
	if len(q) == 0 {
		return nil
	}
	f := q[0]
	if q[0].Times > 0 {
		q[0].Times--
		if q[0].Times == 0 {
			b.failures[v] = q[1:]
		}
	}
	return &f
}

// carriedOut reports whether a request meeting f is still processed.
func (f *Failure) carriedOut() bool {
	return f == nil || f.Status == 0 || f.Status < 300
}

// answer holds the answer back for f.Delay and until f.Until is closed,
// and replaces it with f's status and body, if any. It reports false if
// the client or Down ended the request meanwhile: then there is no answer
// at all.
func (f *Failure) answer(ctx context.Context, res response) (response, bool) {
	if f.Delay > 0 {
		timer := time.NewTimer(f.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return response{}, false
		}
	}
	if f.Until != nil {
		select {
		case <-f.Until:
		case <-ctx.Done():
			return response{}, false
		}
	}
	switch {
	case f.Status == 0:
		return res, true
	case f.Status < 300:
		return response{status: f.Status, raw: []byte(f.Body), isRaw: true}, true
	case f.Body != "":
		res = response{status: f.Status, raw: []byte(f.Body), isRaw: true}
		if f.RetryAfter > 0 {
			res.header = http.Header{"Retry-After": {strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds())))}}
		}
		return res, true
	}
	description := f.description()
	if description == "" {
		description = http.StatusText(f.Status) + " (injected by osbtest)."
	}
	body := map[string]any{"description": description}
	if f.Code != "" {
		body["error"] = f.Code
	}
	if f.InstanceUsable != nil {
		body["instance_usable"] = *f.InstanceUsable
	}
	if f.UpdateRepeatable != nil {
		body["update_repeatable"] = *f.UpdateRepeatable
	}
	res = response{status: f.Status, body: body}
	if f.RetryAfter > 0 {
		res.header = http.Header{"Retry-After": {strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds())))}}
	}
	return res, true
}

// description is the description of an answer f makes.
func (f *Failure) description() string {
	if f.Describe != nil {
		return f.Describe()
	}
	return f.Description
}
