package osbtest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// Request is one request the broker received, for assertions.
type Request struct {
	Verb     Verb
	Method   string
	Path     string // decoded, as in url.URL.Path
	RawQuery string // as sent, still percent-encoded
	Query    url.Values
	// Header holds every header but Authorization, whose value is never
	// kept; Authorization says whether one was sent.
	Header              http.Header
	Authorization       bool
	APIVersion          string // X-Broker-API-Version
	OriginatingIdentity string // X-Broker-API-Originating-Identity
	RequestIdentity     string // X-Broker-API-Request-Identity
	Body                []byte
	Time                time.Time
}

// record appends r to the request log and counts it. b.mu is held.
func (b *Broker) record(v Verb, r *http.Request, body []byte) {
	h := r.Header.Clone()
	h.Del("Authorization")
	b.requests = append(b.requests, Request{
		Verb:                v,
		Method:              r.Method,
		Path:                r.URL.Path,
		RawQuery:            r.URL.RawQuery,
		Query:               r.URL.Query(),
		Header:              h,
		Authorization:       r.Header.Get("Authorization") != "",
		APIVersion:          r.Header.Get("X-Broker-API-Version"),
		OriginatingIdentity: r.Header.Get("X-Broker-API-Originating-Identity"),
		RequestIdentity:     r.Header.Get("X-Broker-API-Request-Identity"),
		Body:                body,
		Time:                time.Now(),
	})
	b.counts[v]++
}

// Requests returns every request received so far, oldest first, including
// those answered 401, 400 or 412.
func (b *Broker) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

// NotModified returns how many catalogue fetches the broker answered 304
// Not Modified (WithCatalogETag).
func (b *Broker) NotModified() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.notModified
}

// Count returns how many requests for v the broker has received.
func (b *Broker) Count(v Verb) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[v]
}

// State is the state of an instance or binding the broker holds.
type State string

// The states of instances and bindings. A resource whose asynchronous
// creation failed stays, as StateFailed, until it is deleted: it is the
// orphan that the platform's orphan mitigation has to remove.
const (
	StateCreating State = "creating"
	StateReady    State = "ready"
	StateUpdating State = "updating"
	StateDeleting State = "deleting"
	StateFailed   State = "failed"
)

// Instance is a snapshot of a service instance the broker holds.
type Instance struct {
	ID               string
	ServiceID        string
	PlanID           string
	OrganizationGUID string
	SpaceGUID        string
	Parameters       map[string]any
	Context          map[string]any
	MaintenanceInfo  *MaintenanceInfo
	State            State
	// Operation is the id of the instance's latest asynchronous operation,
	// or "" if there is none.
	Operation string
}

// Binding is a snapshot of a service binding the broker holds.
type Binding struct {
	ID           string
	InstanceID   string
	ServiceID    string
	PlanID       string
	AppGUID      string // bind_resource.app_guid, or the deprecated app_guid
	BindResource map[string]any
	Context      map[string]any
	Parameters   map[string]any
	Credentials  map[string]any
	Endpoints    []Endpoint
	State        State
	// Operation is the id of the binding's latest asynchronous operation,
	// or "" if there is none.
	Operation string
}

// Endpoint is the OSB Endpoint object of a binding.
type Endpoint struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

// Instances returns the instances the broker holds, by id.
func (b *Broker) Instances() []Instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Instance, 0, len(b.instances))
	for _, in := range b.instances {
		s := in.Instance
		s.Parameters = cloneJSON(s.Parameters)
		s.Context = cloneJSON(s.Context)
		if s.MaintenanceInfo != nil {
			s.MaintenanceInfo = new(*s.MaintenanceInfo)
		}
		s.Operation = in.last().id
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Bindings returns the bindings the broker holds, by instance and binding
// id. Bindings outlive their instance when it is deprovisioned first.
func (b *Broker) Bindings() []Binding {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Binding, 0, len(b.bindings))
	for _, bd := range b.bindings {
		s := bd.Binding
		s.BindResource = cloneJSON(s.BindResource)
		s.Context = cloneJSON(s.Context)
		s.Parameters = cloneJSON(s.Parameters)
		s.Credentials = cloneJSON(s.Credentials)
		s.Endpoints = slices.Clone(s.Endpoints)
		s.Operation = bd.last().id
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Binding) int {
		return cmp.Or(cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// cloneJSON deep-copies a JSON object, with numbers as float64 as a client
// decoding the broker's answers sees them.
func cloneJSON(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	data, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("osbtest: clone JSON object: %v", err))
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(fmt.Sprintf("osbtest: clone JSON object: %v", err))
	}
	return out
}

// instance is a service instance and its operations, oldest first (never
// empty: the first is its provision).
type instance struct {
	Instance
	ops []*operation
}

func (in *instance) last() *operation { return in.ops[len(in.ops)-1] }

// bindingKey identifies a binding: ids are only unique per instance.
type bindingKey struct{ instance, binding string }

// binding is a service binding and its operations, oldest first.
type binding struct {
	Binding
	ops []*operation
}

func (bd *binding) last() *operation { return bd.ops[len(bd.ops)-1] }

// opKind is what an operation does.
type opKind string

const (
	opProvision   opKind = "provision"
	opUpdate      opKind = "update"
	opDeprovision opKind = "deprovision"
	opBind        opKind = "bind"
	opUnbind      opKind = "unbind"
)

// The last_operation states.
const (
	inProgress = "in progress"
	succeeded  = "succeeded"
	failed     = "failed"
)

// operation is a provision, update, deprovision, bind or unbind; an
// asynchronous one advances with each poll.
type operation struct {
	id    string // "" for synchronous ones, or with an empty prefix
	kind  opKind
	state string
	polls int
	fail  *Failure // non-nil: the operation ends failed
	// forever: the operation stays in progress until halted.
	forever bool
	started time.Time

	// What an update changes when it succeeds.
	planID string
	params map[string]any
	maint  *MaintenanceInfo
}

// newOperation starts an operation: an asynchronous one is in progress, a
// synchronous one has succeeded. b.mu is held.
func (b *Broker) newOperation(kind opKind, async bool, f *Failure) *operation {
	op := &operation{kind: kind, state: succeeded}
	if !async {
		return op
	}
	op.state = inProgress
	op.started = time.Now()
	b.opSeq++
	if b.opts.opPrefix != "" {
		op.id = fmt.Sprintf("%s%d", b.opts.opPrefix, b.opSeq)
	}
	if f != nil && f.AsyncFailed {
		op.fail = f
	}
	op.forever = f != nil && f.NeverFinishes
	return op
}

// advance counts a poll of op and reports whether the operation finished
// with it. b.mu is held.
func (b *Broker) advance(op *operation) bool {
	if op.state != inProgress {
		return false
	}
	op.polls++
	switch {
	case op.forever:
		return false
	case op.fail != nil && op.fail.After > 0:
		if time.Since(op.started) < op.fail.After {
			return false
		}
	case op.polls <= b.opts.polls:
		return false
	}
	op.state = succeeded
	if op.fail != nil {
		op.state = failed
	}
	return true
}

// halt fails an operation in progress because a delete request stopped it
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#deprovisioning).
// It reports whether op was in progress.
func halt(op *operation) bool {
	if op.state != inProgress {
		return false
	}
	op.state = failed
	op.fail = &Failure{Description: fmt.Sprintf("The %s was halted by a delete request.", op.kind)}
	return true
}
