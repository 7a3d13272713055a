package osbtest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// maxBody bounds request bodies; OSB bodies are small.
const maxBody = 1 << 20

// response is an answer, built while b.mu is held and written after.
type response struct {
	status int
	body   any // encoded as JSON, unless isRaw
	raw    []byte
	isRaw  bool
	header http.Header
}

func (res response) write(w http.ResponseWriter) {
	data := res.raw
	if !res.isRaw {
		var err error
		if data, err = json.Marshal(res.body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	maps.Copy(w.Header(), res.header)
	if len(data) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(data)
}

// osbError is an OSB error answer
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#service-broker-errors).
func osbError(status int, code, format string, args ...any) response {
	body := map[string]any{"description": fmt.Sprintf(format, args...)}
	if code != "" {
		body["error"] = code
	}
	return response{status: status, body: body}
}

func badRequest(format string, args ...any) response {
	return osbError(http.StatusBadRequest, "BadRequest", format, args...)
}

func notFound(format string, args ...any) response {
	return osbError(http.StatusNotFound, "NotFound", format, args...)
}

func conflict(format string, args ...any) response {
	return osbError(http.StatusConflict, "Conflict", format, args...)
}

func asyncRequired() response {
	return osbError(http.StatusUnprocessableEntity, "AsyncRequired",
		"This Service Plan requires client support for asynchronous service operations.")
}

func concurrencyError(what string) response {
	return osbError(http.StatusUnprocessableEntity, "ConcurrencyError",
		"Another operation for this %s is in progress.", what)
}

func reply(status int, body any) response { return response{status: status, body: body} }

func empty() map[string]any { return map[string]any{} }

// accepted is the 202 answer that starts an asynchronous operation.
func accepted(op *operation) response {
	if op.id == "" {
		return reply(http.StatusAccepted, empty())
	}
	return reply(http.StatusAccepted, map[string]any{"operation": op.id})
}

// handlerFunc answers an admitted request; f is the failure that applies to
// it, if any. b.mu is held.
type handlerFunc func(r *http.Request, body []byte, f *Failure) response

func (b *Broker) routes() http.Handler {
	const (
		instance = "/v2/service_instances/{instance_id}"
		binding  = instance + "/service_bindings/{binding_id}"
	)
	mux := http.NewServeMux()
	mux.Handle("GET /v2/catalog", b.handle(VerbCatalog, b.getCatalog))
	mux.Handle("PUT "+instance, b.handle(VerbProvision, b.provision))
	mux.Handle("PATCH "+instance, b.handle(VerbUpdate, b.update))
	mux.Handle("DELETE "+instance, b.handle(VerbDeprovision, b.deprovision))
	mux.Handle("GET "+instance, b.handle(VerbFetchInstance, b.fetchInstance))
	mux.Handle("GET "+instance+"/last_operation", b.handle(VerbLastOperation, b.lastOperation))
	mux.Handle("PUT "+binding, b.handle(VerbBind, b.bind))
	mux.Handle("DELETE "+binding, b.handle(VerbUnbind, b.unbind))
	mux.Handle("GET "+binding, b.handle(VerbFetchBinding, b.fetchBinding))
	mux.Handle("GET "+binding+"/last_operation", b.handle(VerbBindingLastOperation, b.bindingLastOperation))
	mux.Handle("/", b.handle(VerbUnknown, func(r *http.Request, _ []byte, _ *Failure) response {
		return notFound("No OSB endpoint %s %s.", r.Method, r.URL.Path)
	}))
	return mux
}

// handle logs the request, checks authentication and the API version,
// applies any failure injected for v and otherwise answers with h.
func (b *Broker) handle(v Verb, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
		// https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#request-identity
		if id := r.Header.Get("X-Broker-API-Request-Identity"); id != "" {
			w.Header().Set("X-Broker-API-Request-Identity", id)
		}
		b.mu.Lock()
		b.record(v, r, body)
		res, ok := b.admit(r)
		var f *Failure
		if ok {
			f = b.takeFailure(v)
			if f.carriedOut() {
				res = h(r, body, f)
			}
		}
		b.mu.Unlock()
		if f != nil {
			if res, ok = f.answer(r.Context(), res); !ok {
				// Cut the connection without a word, as a dead broker would.
				panic(http.ErrAbortHandler)
			}
		}
		res.write(w)
	})
}

// admit answers 401 without valid credentials, then 400 without
// X-Broker-API-Version and 412 for versions before 2.13
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#api-version-header).
func (b *Broker) admit(r *http.Request) (response, bool) {
	if !b.authorized(r) {
		res := osbError(http.StatusUnauthorized, "Unauthorized", "The request has no valid credentials.")
		challenge := `Basic realm="osbtest"`
		if b.opts.username == "" {
			challenge = `Bearer realm="osbtest"`
		}
		res.header = http.Header{"Www-Authenticate": {challenge}}
		return res, false
	}
	v := r.Header.Get("X-Broker-API-Version")
	if v == "" {
		return badRequest("The X-Broker-API-Version header is required."), false
	}
	major, minor, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(minor)
	if major != "2" || err != nil || n < 13 {
		return osbError(http.StatusPreconditionFailed, "PreconditionFailed",
			"X-Broker-API-Version %q is not supported: use 2.13 or later.", v), false
	}
	return response{}, true
}

func (b *Broker) authorized(r *http.Request) bool {
	o := b.opts
	if o.username == "" && o.token == "" {
		return true
	}
	if o.token != "" {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(token), []byte(o.token)) == 1 {
			return true
		}
	}
	if o.username != "" {
		user, password, ok := r.BasicAuth()
		// Both compared, in constant time, as a broker must.
		u := subtle.ConstantTimeCompare([]byte(user), []byte(o.username))
		p := subtle.ConstantTimeCompare([]byte(password), []byte(o.password))
		return ok && u&p == 1
	}
	return false
}

// acceptsIncomplete reads the accepts_incomplete query parameter.
func acceptsIncomplete(r *http.Request) (bool, response, bool) {
	v := r.URL.Query().Get("accepts_incomplete")
	if v == "" {
		return false, response{}, true
	}
	async, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("accepts_incomplete: %q is not a boolean", v), false
	}
	return async, response{}, true
}

// async decides whether an operation on plan (nil if no longer in the
// catalog) runs asynchronously, or answers 422 AsyncRequired.
func (b *Broker) async(plan *Plan, accepts bool, f *Failure) (bool, response, bool) {
	required := (plan != nil && plan.AsyncRequired) || (f != nil && (f.AsyncFailed || f.NeverFinishes))
	if required && !accepts {
		return false, asyncRequired(), false
	}
	return accepts && (required || b.opts.async || (plan != nil && plan.Async)), response{}, true
}

// decode reads a JSON object body; unknown fields are ignored, as OSB
// requires for vendor extensions.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// missing lists the names of the empty values among name, value pairs.
func missing(pairs ...string) string {
	var names []string
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			names = append(names, pairs[i])
		}
	}
	return strings.Join(names, ", ")
}

// plan finds a plan of a service in the current catalog, or answers 400.
func (b *Broker) plan(serviceID, planID string) (*planRef, response, bool) {
	p := b.plans[planID]
	if p == nil || p.service.ID != serviceID {
		return nil, badRequest("plan_id: no plan %q in service %q", planID, serviceID), false
	}
	return p, response{}, true
}

// planOf is a plan by id, or nil when the catalog no longer has it.
func (b *Broker) planOf(id string) *Plan {
	if p := b.plans[id]; p != nil {
		return p.plan
	}
	return nil
}

// checkMaintenance answers 422 MaintenanceInfoConflict when the requested
// maintenance_info.version is not the plan's.
func checkMaintenance(plan *Plan, mi *MaintenanceInfo) (response, bool) {
	switch {
	case mi == nil:
		return response{}, true
	case mi.Version == "":
		return badRequest("maintenance_info.version: required when maintenance_info is given"), false
	case plan == nil || plan.MaintenanceInfo == nil || plan.MaintenanceInfo.Version != mi.Version:
		return osbError(http.StatusUnprocessableEntity, "MaintenanceInfoConflict",
			"The maintenance information for the requested Service Plan has changed."), false
	}
	return response{}, true
}

// sameJSON compares decoded JSON objects; absent and empty are the same.
func sameJSON(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// getCatalog handles GET /v2/catalog
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#catalog-management).
// With WithCatalogETag, the catalogue has a strong ETag and a request whose
// If-None-Match names it is answered 304 Not Modified (RFC 7232).
func (b *Broker) getCatalog(r *http.Request, _ []byte, _ *Failure) response {
	if !b.opts.catalogETag {
		return response{status: http.StatusOK, raw: b.catalogBody, isRaw: true}
	}
	sum := sha256.Sum256(b.catalogBody)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	header := http.Header{"Etag": {etag}}
	for tag := range strings.SplitSeq(r.Header.Get("If-None-Match"), ",") {
		if tag = strings.TrimSpace(tag); tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			b.notModified++
			return response{status: http.StatusNotModified, header: header, isRaw: true}
		}
	}
	return response{status: http.StatusOK, raw: b.catalogBody, isRaw: true, header: header}
}

// findOperation picks the operation a poll asks about: the one named by the
// operation query parameter, or else the latest.
func findOperation(ops []*operation, r *http.Request) (*operation, response, bool) {
	q := r.URL.Query()
	if !q.Has("operation") {
		return ops[len(ops)-1], response{}, true
	}
	name := q.Get("operation")
	if name == "" {
		return nil, badRequest("operation: must be a non-empty string"), false
	}
	for _, op := range ops {
		if op.id == name {
			return op, response{}, true
		}
	}
	return nil, badRequest("operation: no operation %q", name), false
}

// pollAnswer is the answer to a poll of op.
func (b *Broker) pollAnswer(op *operation) response {
	if op.state == succeeded && (op.kind == opDeprovision || op.kind == opUnbind) && b.opts.goneOnDelete {
		return reply(http.StatusGone, empty())
	}
	body := map[string]any{"state": op.state}
	switch op.state {
	case inProgress:
		body["description"] = fmt.Sprintf("The %s is in progress (poll %d).", op.kind, op.polls)
	case succeeded:
		body["description"] = fmt.Sprintf("The %s succeeded.", op.kind)
	case failed:
		body["description"] = fmt.Sprintf("The %s failed.", op.kind)
		if d := op.fail.description(); d != "" {
			body["description"] = d
		}
		// The spec allows these fields for these operations only.
		if (op.kind == opUpdate || op.kind == opDeprovision) && op.fail.InstanceUsable != nil {
			body["instance_usable"] = *op.fail.InstanceUsable
		}
		if op.kind == opUpdate && op.fail.UpdateRepeatable != nil {
			body["update_repeatable"] = *op.fail.UpdateRepeatable
		}
	}
	res := reply(http.StatusOK, body)
	if op.state == inProgress && b.opts.retryAfter >= 0 {
		seconds := int(math.Ceil(b.opts.retryAfter.Seconds()))
		res.header = http.Header{"Retry-After": {strconv.Itoa(seconds)}}
	}
	return res
}
