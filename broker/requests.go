package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/internal/params"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// maxBody bounds request bodies: OSB bodies are small; schemas are 64 kB.
const maxBody = 1 << 20

// provisionRequest is the body of PUT /v2/service_instances/:instance_id.
type provisionRequest struct {
	ServiceID        string           `json:"service_id"`
	PlanID           string           `json:"plan_id"`
	Context          json.RawMessage  `json:"context,omitempty"`
	OrganizationGUID string           `json:"organization_guid"`
	SpaceGUID        string           `json:"space_guid"`
	Parameters       map[string]any   `json:"parameters,omitempty"`
	MaintenanceInfo  *MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// updateRequest is the body of PATCH /v2/service_instances/:instance_id.
// Parameters is a pointer so that an absent field (change nothing) differs
// from an empty object.
type updateRequest struct {
	ServiceID       string           `json:"service_id"`
	PlanID          string           `json:"plan_id,omitempty"`
	Context         json.RawMessage  `json:"context,omitempty"`
	Parameters      *map[string]any  `json:"parameters,omitempty"`
	MaintenanceInfo *MaintenanceInfo `json:"maintenance_info,omitempty"`
	PreviousValues  *previousValues  `json:"previous_values,omitempty"`
}

// previousValues is an update's previous_values: what the platform knew of
// the instance. The broker keeps its own record and reads none of it, but
// its members are typed as the spec has them.
type previousValues struct {
	ServiceID       string           `json:"service_id"`
	PlanID          string           `json:"plan_id"`
	OrganizationID  string           `json:"organization_id"`
	SpaceID         string           `json:"space_id"`
	MaintenanceInfo *MaintenanceInfo `json:"maintenance_info"`
}

// bindRequest is the body of PUT .../service_bindings/:binding_id.
type bindRequest struct {
	ServiceID            string          `json:"service_id"`
	PlanID               string          `json:"plan_id"`
	Context              json.RawMessage `json:"context,omitempty"`
	AppGUID              string          `json:"app_guid,omitempty"`
	BindResource         json.RawMessage `json:"bind_resource,omitempty"`
	Parameters           map[string]any  `json:"parameters,omitempty"`
	PredecessorBindingID string          `json:"predecessor_binding_id,omitempty"`
}

// bindResource is what the broker reads of a bind request's
// bind_resource, whose other members are kept as sent.
type bindResource struct {
	AppGUID string `json:"app_guid"`
	Route   string `json:"route"`
}

// appGUID is bind_resource.app_guid, or the deprecated top-level app_guid.
func (r *bindRequest) appGUID() string {
	var res bindResource
	if len(r.BindResource) > 0 && json.Unmarshal(r.BindResource, &res) == nil && res.AppGUID != "" {
		return res.AppGUID
	}
	return r.AppGUID
}

// checkObjects checks a bind request's context and bind_resource: objects
// when present, and the members of bind_resource the spec names strings.
func (r *bindRequest) checkObjects() error {
	if err := validObject("context", r.Context); err != nil {
		return err
	}
	if err := validObject("bind_resource", r.BindResource); err != nil || len(r.BindResource) == 0 {
		return err
	}
	var res bindResource
	if err := json.Unmarshal(r.BindResource, &res); err != nil {
		return decodeError("bind_resource", err)
	}
	return nil
}

// decodeBody reads a JSON object body. Unknown fields are ignored, as OSB
// requires for vendor extensions; anything else wrong is a 400.
func decodeBody(c echo.Context, v any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBody+1))
	if err != nil {
		return errBadRequest("request body: %v", err)
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	if len(body) > maxBody {
		return newError(http.StatusRequestEntityTooLarge, "", "request body: larger than the limit of %d bytes", maxBody)
	}
	if err := pgtext.CheckJSON("", body); err != nil {
		return errBadRequest("%v", err)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return errBadRequest("request body: a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return decodeError("", err)
	}
	if dec.More() {
		return errBadRequest("request body: more than one JSON value")
	}
	return nil
}

// decodeError is the 400 for a JSON document, or the member at path of
// the body, that could not be decoded: a member of the wrong type is named.
func decodeError(path string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return errBadRequest("%s: must be %s, not %s", pgtext.Member(path, te.Field), jsonKind(te.Type.Kind()), te.Value)
	}
	if path == "" {
		path = "request body"
	}
	return errBadRequest("%s: %v", path, err)
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.Bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// validate checks the required fields of a provision request.
func (r *provisionRequest) validate() error {
	if err := checkIDs(map[string]string{
		"service_id": r.ServiceID, "plan_id": r.PlanID, "organization_guid": r.OrganizationGUID, "space_guid": r.SpaceGUID,
	}); err != nil {
		return err
	}
	var missing []string
	for name, v := range map[string]string{
		"service_id": r.ServiceID, "plan_id": r.PlanID,
		"organization_guid": r.OrganizationGUID, "space_guid": r.SpaceGUID,
	} {
		if strings.TrimSpace(v) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return errBadRequest("%s: required, must be a non-empty string", strings.Join(missing, ", "))
	}
	if err := validObject("context", r.Context); err != nil {
		return err
	}
	if r.MaintenanceInfo != nil && r.MaintenanceInfo.Version == "" {
		return errBadRequest("maintenance_info.version: required when maintenance_info is given")
	}
	return nil
}

// validObject checks that raw, a member of a body already decoded as JSON,
// is an object when present. Its members are kept as sent: a number no
// float64 holds is fine (jsonb keeps it).
func validObject(name string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '{' || string(raw) == "null" {
		return nil
	}
	kind := "a number"
	switch raw[0] {
	case '[':
		kind = "an array"
	case '"':
		kind = "a string"
	case 't', 'f':
		kind = "a boolean"
	}
	return errBadRequest("%s: must be an object, not %s", name, kind)
}

// acceptsIncomplete reads the accepts_incomplete query parameter.
func acceptsIncomplete(c echo.Context) (bool, error) {
	switch v := c.QueryParam("accepts_incomplete"); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, errBadRequest("accepts_incomplete: must be true or false, not %q", v)
	}
}

// requireQuery returns the named query parameters, all required.
func requireQuery(c echo.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if c.QueryParam(n) == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return errBadRequest("query parameter %s: required", strings.Join(missing, ", "))
	}
	return nil
}

// optionalQuery rejects query parameters that are present but empty, as
// OSB requires them to be non-empty when present.
func optionalQuery(c echo.Context, names ...string) error {
	q := c.QueryParams()
	for _, n := range names {
		if vs, ok := q[n]; ok && (len(vs) == 0 || vs[0] == "") {
			return errBadRequest("query parameter %s: must not be empty when present", n)
		}
	}
	return nil
}

// validateParameters checks parameters against a plan schema; the error
// names the failing path inside `parameters`.
func validateParameters(schema *params.Schema, p map[string]any) error {
	if msgs := schema.Validate("parameters", p); len(msgs) > 0 {
		return errBadRequest("%s", params.Join(msgs))
	}
	return nil
}

// sameJSON compares two JSON-shaped values semantically.
func sameJSON(a, b any) bool {
	na, nb := normalise(a), normalise(b)
	return reflect.DeepEqual(na, nb)
}

func normalise(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case map[string]any:
		if len(v) == 0 {
			return nil
		}
	case json.RawMessage:
		if len(v) == 0 || string(v) == "null" {
			return nil
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	if m, ok := out.(map[string]any); ok && len(m) == 0 {
		return nil
	}
	return out
}
