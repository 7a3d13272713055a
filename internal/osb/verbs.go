package osb

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	v2 "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/bindery-dev/bindery/internal/backoff"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// The verbs below build on the client library's types where they fit and
// add what OSB 2.15–2.17 defines (maintenance_info, endpoints, binding
// rotation, Retry-After, instance_usable/update_repeatable), each request
// carrying a context.

// Identity is the originating identity of a request: the platform and the
// user as a JSON object (X-Broker-API-Originating-Identity).
type Identity struct {
	Platform string
	Value    map[string]any
}

// MalformedError is a success status whose body cannot be read. The
// orphan-mitigation table treats it as a failure.
type MalformedError struct {
	Status int
	Err    error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("broker answered %d with a malformed body: %v", e.Status, e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }

// IsTimeout reports whether err is a request that timed out.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// LastOperationState is the state of an asynchronous operation.
type LastOperationState = v2.LastOperationState

// The states of an asynchronous operation.
const (
	StateInProgress = v2.StateInProgress
	StateSucceeded  = v2.StateSucceeded
	StateFailed     = v2.StateFailed
)

// MaintenanceInfo is the OSB maintenance_info object.
type MaintenanceInfo = v2.MaintenanceInfo

// Endpoint is an OSB 2.17 endpoint of a binding.
type Endpoint struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

// ProvisionRequest is PUT /v2/service_instances/:instance_id.
type ProvisionRequest struct {
	InstanceID        string           `json:"-"`
	AcceptsIncomplete bool             `json:"-"`
	Identity          *Identity        `json:"-"`
	ServiceID         string           `json:"service_id"`
	PlanID            string           `json:"plan_id"`
	OrganizationGUID  string           `json:"organization_guid"`
	SpaceGUID         string           `json:"space_guid"`
	Parameters        map[string]any   `json:"parameters,omitempty"`
	Context           map[string]any   `json:"context,omitempty"`
	MaintenanceInfo   *MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// OperationResponse is the answer to a provision, update, deprovision,
// bind or unbind: done (Async false), or accepted with an operation to poll.
type OperationResponse struct {
	Status       int
	Async        bool
	Operation    string
	DashboardURL string
	// Gone is a 410 to a deprovision or unbind: the object is already gone.
	Gone bool
}

// Provision asks the broker for a new instance.
func (c *Client) Provision(ctx context.Context, r *ProvisionRequest) (*OperationResponse, error) {
	return c.operation(ctx, http.MethodPut, "/v2/service_instances/"+url.PathEscape(r.InstanceID), r.AcceptsIncomplete, nil, r, r.Identity)
}

// UpdateRequest is PATCH /v2/service_instances/:instance_id.
type UpdateRequest struct {
	InstanceID        string           `json:"-"`
	AcceptsIncomplete bool             `json:"-"`
	Identity          *Identity        `json:"-"`
	ServiceID         string           `json:"service_id"`
	PlanID            string           `json:"plan_id,omitempty"`
	Parameters        map[string]any   `json:"parameters,omitempty"`
	Context           map[string]any   `json:"context,omitempty"`
	MaintenanceInfo   *MaintenanceInfo `json:"maintenance_info,omitempty"`
	PreviousValues    *PreviousValues  `json:"previous_values,omitempty"`
}

// PreviousValues describe an instance before an update.
type PreviousValues struct {
	ServiceID       string           `json:"service_id,omitempty"`
	PlanID          string           `json:"plan_id,omitempty"`
	MaintenanceInfo *MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// Update changes an instance's plan, parameters or maintenance version.
func (c *Client) Update(ctx context.Context, r *UpdateRequest) (*OperationResponse, error) {
	return c.operation(ctx, http.MethodPatch, "/v2/service_instances/"+url.PathEscape(r.InstanceID), r.AcceptsIncomplete, nil, r, r.Identity)
}

// DeprovisionRequest is DELETE /v2/service_instances/:instance_id.
type DeprovisionRequest struct {
	InstanceID        string
	ServiceID, PlanID string
	AcceptsIncomplete bool
	Identity          *Identity
}

// Deprovision deletes an instance.
func (c *Client) Deprovision(ctx context.Context, r *DeprovisionRequest) (*OperationResponse, error) {
	q := url.Values{"service_id": {r.ServiceID}, "plan_id": {r.PlanID}}
	return c.operation(ctx, http.MethodDelete, "/v2/service_instances/"+url.PathEscape(r.InstanceID), r.AcceptsIncomplete, q, nil, r.Identity)
}

// BindRequest is PUT .../service_bindings/:binding_id.
type BindRequest struct {
	InstanceID           string         `json:"-"`
	BindingID            string         `json:"-"`
	AcceptsIncomplete    bool           `json:"-"`
	Identity             *Identity      `json:"-"`
	ServiceID            string         `json:"service_id"`
	PlanID               string         `json:"plan_id"`
	AppGUID              string         `json:"app_guid,omitempty"`
	BindResource         map[string]any `json:"bind_resource,omitempty"`
	Parameters           map[string]any `json:"parameters,omitempty"`
	Context              map[string]any `json:"context,omitempty"`
	PredecessorBindingID string         `json:"predecessor_binding_id,omitempty"`
}

// Binding is what a broker returns for a binding.
type Binding struct {
	Credentials     map[string]any `json:"credentials,omitempty"`
	Endpoints       []Endpoint     `json:"endpoints,omitempty"`
	SyslogDrainURL  string         `json:"syslog_drain_url,omitempty"`
	RouteServiceURL string         `json:"route_service_url,omitempty"`
	Parameters      map[string]any `json:"parameters,omitempty"`
	Metadata        *struct {
		ExpiresAt   string `json:"expires_at,omitempty"`
		RenewBefore string `json:"renew_before,omitempty"`
	} `json:"metadata,omitempty"`
}

// BindResponse is the answer to a bind: the binding when synchronous.
type BindResponse struct {
	OperationResponse
	Binding
}

func bindingPath(instanceID, bindingID string) string {
	return "/v2/service_instances/" + url.PathEscape(instanceID) + "/service_bindings/" + url.PathEscape(bindingID)
}

// Bind creates a binding (or rotates one, with PredecessorBindingID).
func (c *Client) Bind(ctx context.Context, r *BindRequest) (*BindResponse, error) {
	out := &BindResponse{}
	res, err := c.do(ctx, MaxBindingAnswer, http.MethodPut, bindingPath(r.InstanceID, r.BindingID), r.AcceptsIncomplete, nil, r, r.Identity)
	if err != nil {
		return nil, err
	}
	out.Status = res.status
	switch res.status {
	case http.StatusOK, http.StatusCreated:
		if err := decodeBinding(res, &out.Binding); err != nil {
			return nil, err
		}
	case http.StatusAccepted:
		var body struct {
			Operation string `json:"operation"`
		}
		if err := decodeAnswer(res, &body); err != nil {
			return nil, err
		}
		if err := checkOperation(body.Operation); err != nil {
			return nil, &MalformedError{Status: res.status, Err: err}
		}
		out.Async, out.Operation = true, body.Operation
	default:
		return nil, decodeError(res)
	}
	return out, nil
}

// GetBinding fetches a binding (after an asynchronous bind).
func (c *Client) GetBinding(ctx context.Context, instanceID, bindingID string) (*Binding, error) {
	res, err := c.do(ctx, MaxBindingAnswer, http.MethodGet, bindingPath(instanceID, bindingID), false, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	if res.status != http.StatusOK {
		return nil, decodeError(res)
	}
	var b Binding
	if err := decodeBinding(res, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// UnbindRequest is DELETE .../service_bindings/:binding_id.
type UnbindRequest struct {
	InstanceID, BindingID string
	ServiceID, PlanID     string
	AcceptsIncomplete     bool
	Identity              *Identity
}

// Unbind deletes a binding.
func (c *Client) Unbind(ctx context.Context, r *UnbindRequest) (*OperationResponse, error) {
	q := url.Values{"service_id": {r.ServiceID}, "plan_id": {r.PlanID}}
	return c.operation(ctx, http.MethodDelete, bindingPath(r.InstanceID, r.BindingID), r.AcceptsIncomplete, q, nil, r.Identity)
}

// LastOperationRequest polls an asynchronous operation of an instance
// (BindingID empty) or a binding.
type LastOperationRequest struct {
	InstanceID, BindingID string
	ServiceID, PlanID     string
	// Operation is sent back exactly as the broker gave it, percent-encoded.
	Operation string
}

// LastOperationResponse is the state of an asynchronous operation.
type LastOperationResponse struct {
	State       LastOperationState
	Description string
	// RetryAfter is the broker's Retry-After, when it sent one.
	RetryAfter       time.Duration
	InstanceUsable   *bool
	UpdateRepeatable *bool
	// Gone is a 410: for a deprovision or unbind, success.
	Gone bool
}

// LastOperation polls an operation.
func (c *Client) LastOperation(ctx context.Context, r *LastOperationRequest) (*LastOperationResponse, error) {
	path := "/v2/service_instances/" + url.PathEscape(r.InstanceID) + "/last_operation"
	if r.BindingID != "" {
		path = bindingPath(r.InstanceID, r.BindingID) + "/last_operation"
	}
	q := url.Values{}
	for k, v := range map[string]string{"service_id": r.ServiceID, "plan_id": r.PlanID, "operation": r.Operation} {
		if v != "" {
			q.Set(k, v)
		}
	}
	res, err := c.do(ctx, MaxAnswer, http.MethodGet, path, false, q, nil, nil)
	if err != nil {
		return nil, err
	}
	out := &LastOperationResponse{RetryAfter: backoff.RetryAfter(res.header.Get("Retry-After"), time.Now())}
	switch res.status {
	case http.StatusOK:
		var body struct {
			State            LastOperationState `json:"state"`
			Description      string             `json:"description"`
			InstanceUsable   *bool              `json:"instance_usable"`
			UpdateRepeatable *bool              `json:"update_repeatable"`
		}
		if err := decodeAnswer(res, &body); err != nil {
			return nil, err
		}
		switch body.State {
		case StateInProgress, StateSucceeded, StateFailed:
		default:
			return nil, &MalformedError{Status: res.status, Err: fmt.Errorf("unknown state %q", body.State)}
		}
		out.State, out.Description = body.State, pgtext.Clip(body.Description, MaxDescription)
		out.InstanceUsable, out.UpdateRepeatable = body.InstanceUsable, body.UpdateRepeatable
	case http.StatusGone:
		out.Gone = true
	default:
		return nil, decodeError(res)
	}
	return out, nil
}

// operation sends a request answered by OperationResponse.
func (c *Client) operation(ctx context.Context, method, path string, async bool, q url.Values, body any, id *Identity) (*OperationResponse, error) {
	res, err := c.do(ctx, MaxAnswer, method, path, async, q, body, id)
	if err != nil {
		return nil, err
	}
	out := &OperationResponse{Status: res.status}
	var doc struct {
		Operation    string `json:"operation"`
		DashboardURL string `json:"dashboard_url"`
	}
	switch res.status {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		if err := decodeAnswer(res, &doc); err != nil {
			return nil, err
		}
		if err := checkOperation(doc.Operation); err != nil {
			return nil, &MalformedError{Status: res.status, Err: err}
		}
		if doc.DashboardURL != "" && DashboardURLProblem(doc.DashboardURL) != "" {
			doc.DashboardURL = ""
		}
		out.Async, out.Operation, out.DashboardURL = res.status == http.StatusAccepted, doc.Operation, doc.DashboardURL
	case http.StatusGone:
		if method != http.MethodDelete {
			return nil, decodeError(res)
		}
		out.Gone = true
	default:
		return nil, decodeError(res)
	}
	return out, nil
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
	// tooLarge: the body went on past the bound it was read to, and body
	// is empty.
	tooLarge bool
	limit    int
}

// do sends a request and reads its answer up to limit bytes.
func (c *Client) do(ctx context.Context, limit int, method, path string, async bool, q url.Values, body any, id *Identity) (*rawResponse, error) {
	if async {
		if q == nil {
			q = url.Values{}
		}
		q.Set("accepts_incomplete", "true")
	}
	target := c.base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var rdr io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rdr)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if id != nil {
		raw, err := json.Marshal(id.Value)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Broker-API-Originating-Identity", id.Platform+" "+base64.StdEncoding.EncodeToString(raw))
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	out, err := readAnswer(res, limit)
	if err != nil {
		return nil, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	return out, nil
}

// errTooLarge says what was done with an answer past its bound.
func (r *rawResponse) errTooLarge() error {
	return fmt.Errorf("the broker's answer was larger than %d KiB and was not read", r.limit>>10)
}

// decodeAnswer decodes a success answer into v; a body past its bound or
// not a JSON object is a MalformedError.
func decodeAnswer(r *rawResponse, v any) error {
	if r.tooLarge {
		return &MalformedError{Status: r.status, Err: r.errTooLarge()}
	}
	if err := decodeStrictObject(r.body, v); err != nil {
		return &MalformedError{Status: r.status, Err: err}
	}
	return nil
}

// decodeBinding decodes a binding and checks its bounds: credentials of at
// most MaxCredentials, and at most MaxEndpoints endpoints.
func decodeBinding(r *rawResponse, b *Binding) error {
	var doc struct {
		Binding
		Credentials json.RawMessage `json:"credentials,omitempty"`
	}
	if err := decodeAnswer(r, &doc); err != nil {
		return err
	}
	*b = doc.Binding
	malformed := func(format string, args ...any) error {
		return &MalformedError{Status: r.status, Err: fmt.Errorf(format, args...)}
	}
	if len(doc.Credentials) > MaxCredentials {
		return malformed("credentials larger than %d KiB", MaxCredentials>>10)
	}
	if len(doc.Credentials) > 0 && string(doc.Credentials) != "null" {
		if err := json.Unmarshal(doc.Credentials, &b.Credentials); err != nil {
			return malformed("credentials: %w", err)
		}
	}
	if len(b.Endpoints) > MaxEndpoints {
		return malformed("%d endpoints, more than %d", len(b.Endpoints), MaxEndpoints)
	}
	for i, e := range b.Endpoints {
		if p := EndpointProblem(e.Host, e.Ports, e.Protocol); p != "" {
			return malformed("endpoints[%d]: %s", i, p)
		}
	}
	return nil
}

// checkOperation checks an operation value against OSB's bound.
func checkOperation(op string) error {
	if n := utf8.RuneCountInString(op); n > MaxOperation {
		return fmt.Errorf("an operation of %d characters, more than OSB's %d", n, MaxOperation)
	}
	return nil
}

// decodeStrictObject requires the body to be a JSON object (extra fields
// are fine: OSB allows vendor extensions).
func decodeStrictObject(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(body, v)
}

// DashboardURLProblem says why u cannot be a dashboard URL, or is "": a
// dashboard is a web page, so an absolute http or https URL of at most
// MaxDashboardURL bytes of text PostgreSQL can store. Anything else (a
// javascript: or data: URL a client would follow) is refused by the
// catalog and ignored in a broker's answer.
func DashboardURLProblem(u string) string {
	if len(u) > MaxDashboardURL {
		return fmt.Sprintf("must be at most %d bytes", MaxDashboardURL)
	}
	if p := pgtext.Problem(u); p != "" {
		return p
	}
	parsed, err := url.Parse(u)
	if err != nil || (!strings.EqualFold(parsed.Scheme, "http") && !strings.EqualFold(parsed.Scheme, "https")) || parsed.Host == "" {
		return "must be an absolute http or https URL"
	}
	return ""
}
