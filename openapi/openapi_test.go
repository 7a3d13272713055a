package openapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/openapi"
	"github.com/bindery-dev/bindery/restapi"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q, want 3.0.3", doc.OpenAPI)
	}
	if _, err := openapi.NewRouter(); err != nil {
		t.Fatal(err)
	}
	// Every operation names its role, and has an id.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			role, _ := op.Extensions["x-bindery-role"].(string)
			if !slices.Contains([]string{"viewer", "developer", "admin"}, role) {
				t.Errorf("%s %s: x-bindery-role %q", method, path, role)
			}
			if !strings.Contains(op.Description, "Needs the "+role+" role") {
				t.Errorf("%s %s: the description does not say it needs the %s role", method, path, role)
			}
		}
	}
}

// TestRoutes checks that the document and restapi have the same
// operations, in both directions, and that each path and method reaches the
// handler the document's operationId names.
func TestRoutes(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	base := doc.Servers[0].URL

	e := echo.New()
	restapi.New(nil, nil).Register(e) // handlers are registered, not called
	served := map[string]string{}     // "METHOD /path" → handler
	for _, r := range e.Routes() {
		if strings.Contains(r.Name, ".unrouted.") {
			continue // the JSON 404 and 405 for what no operation takes
		}
		if !strings.HasPrefix(r.Path, base+"/") {
			t.Errorf("route %s %s is outside %s", r.Method, r.Path, base)
			continue
		}
		parts := strings.Split(strings.TrimPrefix(r.Path, base), "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		name := r.Name[strings.LastIndex(r.Name, ".")+1:]
		served[r.Method+" "+strings.Join(parts, "/")] = strings.TrimSuffix(name, "-fm")
	}

	described := map[string]string{} // "METHOD /path" → operationId
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			described[method+" "+path] = op.OperationID
		}
	}

	for _, k := range sortedKeys(served) {
		id, ok := described[k]
		switch {
		case !ok:
			t.Errorf("%s is served but not in openapi.yaml", k)
		case id != served[k]:
			t.Errorf("%s: operationId %s, but the handler is %s", k, id, served[k])
		}
	}
	for _, k := range sortedKeys(described) {
		if _, ok := served[k]; !ok {
			t.Errorf("%s is in openapi.yaml but not served", k)
		}
	}
	if len(served) == 0 {
		t.Fatal("no routes registered")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestSchemasMirrorTypes checks the component schemas against the Go
// types the server encodes: the same JSON field names, required exactly
// when the field has no omitempty, and values of the types filled in
// wholly, and left zero, validate.
func TestSchemasMirrorTypes(t *testing.T) {
	t.Parallel()
	doc, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		schema string
		value  any
	}{
		{"Broker", catalog.Broker{}},
		{"ServiceClass", catalog.ServiceClass{}},
		{"ServicePlan", catalog.ServicePlan{}},
		{"Instance", catalog.Instance{}},
		{"Binding", catalog.Binding{}},
		{"InstanceObject", restapi.InstanceView{}},
		{"BindingObject", restapi.BindingView{}},
		{"Event", catalog.Event{}},
		{"BrokerList", catalog.List[*catalog.Broker]{}},
		{"ServiceClassList", catalog.List[*catalog.ServiceClass]{}},
		{"ServicePlanList", catalog.List[*catalog.ServicePlan]{}},
		{"InstanceList", catalog.List[*catalog.Instance]{}},
		{"BindingList", catalog.List[*catalog.Binding]{}},
		{"Error", restapi.APIError{}},
		{"Quota", catalog.Quota{}},
		{"QuotaStatus", catalog.QuotaStatus{}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			t.Parallel()
			ref := doc.Components.Schemas[tt.schema]
			if ref == nil {
				t.Fatalf("no schema %s", tt.schema)
			}
			typ := reflect.TypeOf(tt.value)
			mirror(t, tt.schema, typ, ref.Value)

			full := reflect.New(typ).Elem()
			fill(full)
			validate(t, ref.Value, full.Interface(), "filled")
			if !strings.HasSuffix(tt.schema, "List") {
				// Lists are never encoded with null items.
				validate(t, ref.Value, reflect.New(typ).Elem().Interface(), "zero")
			}
		})
	}
}

// mirror compares a Go type's JSON encoding with a schema, recursively.
func mirror(t *testing.T, path string, typ reflect.Type, s *openapi3.Schema) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	s = merged(s)
	switch {
	case typ == reflect.TypeOf(json.RawMessage{}):
		if s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has {
			t.Errorf("%s: free-form JSON, but the schema allows no properties", path)
		}
		return
	case typ == reflect.TypeOf(time.Time{}):
		if !s.Type.Is("string") || s.Format != "date-time" {
			t.Errorf("%s: a time, but the schema is %v %q", path, s.Type, s.Format)
		}
		return
	}
	want := map[reflect.Kind]string{
		reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int64: "integer",
		reflect.Slice: "array", reflect.Map: "object", reflect.Struct: "object",
	}[typ.Kind()]
	if typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8 {
		want = "string"
	}
	if !s.Type.Is(want) {
		t.Errorf("%s: Go %s, but the schema's type is %v", path, typ, s.Type.Slice())
		return
	}
	switch typ.Kind() {
	case reflect.Slice:
		if want == "array" {
			mirror(t, path+"[]", typ.Elem(), s.Items.Value)
		}
	case reflect.Map:
		if s.AdditionalProperties.Schema == nil {
			t.Errorf("%s: a map, but the schema has no additionalProperties schema", path)
			return
		}
		mirror(t, path+"{}", typ.Elem(), s.AdditionalProperties.Schema.Value)
	case reflect.Struct:
		fields, required := jsonFields(typ)
		for _, name := range sortedKeys(fields) {
			p := s.Properties[name]
			if p == nil {
				t.Errorf("%s.%s: encoded, but not in the schema", path, name)
				continue
			}
			mirror(t, path+"."+name, fields[name], p.Value)
		}
		for _, name := range sortedKeys(s.Properties) {
			if _, ok := fields[name]; !ok {
				t.Errorf("%s.%s: in the schema, but %s has no such field", path, name, typ)
			}
		}
		slices.Sort(required)
		req := slices.Clone(s.Required)
		slices.Sort(req)
		if !slices.Equal(required, req) {
			t.Errorf("%s: required %v, but the fields always encoded are %v", path, req, required)
		}
	}
}

// merged folds allOf into one schema (properties, required, type).
func merged(s *openapi3.Schema) *openapi3.Schema {
	if len(s.AllOf) == 0 {
		return s
	}
	out := *s
	out.AllOf = nil
	out.Properties = openapi3.Schemas{}
	parts := []*openapi3.Schema{s}
	for _, sub := range s.AllOf {
		parts = append(parts, merged(sub.Value))
	}
	for _, m := range parts {
		for k, v := range m.Properties {
			out.Properties[k] = v
		}
		for _, r := range m.Required {
			if !slices.Contains(out.Required, r) {
				out.Required = append(out.Required, r)
			}
		}
		if out.Type == nil || len(out.Type.Slice()) == 0 {
			out.Type = m.Type
		}
		if out.AdditionalProperties.Has == nil {
			out.AdditionalProperties = m.AdditionalProperties
		}
	}
	return &out
}

// jsonFields lists a struct's JSON fields (embedded structs flattened) and
// those encoded always (neither omitempty nor omitzero).
func jsonFields(typ reflect.Type) (map[string]reflect.Type, []string) {
	fields := map[string]reflect.Type{}
	var required []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Anonymous {
			sub, req := jsonFields(f.Type)
			for k, v := range sub {
				fields[k] = v
			}
			required = append(required, req...)
			continue
		}
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
		if o := strings.Split(opts, ","); !slices.Contains(o, "omitempty") && !slices.Contains(o, "omitzero") {
			required = append(required, name)
		}
	}
	return fields, required
}

// fill sets every field of v to a value that is not zero.
func fill(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeOf(json.RawMessage{}):
		v.SetBytes([]byte(`{"a":1}`))
		return
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Now()))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte("x"))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e)
		v.SetMapIndex(reflect.ValueOf("k"), e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	}
}

// validate encodes v and validates it against s. Enumerated strings are
// set to their first value first, since fill cannot know them.
func validate(t *testing.T, s *openapi3.Schema, v any, what string) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	fixEnums(s, doc)
	if err := s.VisitJSON(doc, openapi3.MultiErrors()); err != nil {
		t.Errorf("%s value does not validate: %v\n%s", what, err, raw)
	}
}

func fixEnums(s *openapi3.Schema, v any) {
	s = merged(s)
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := s.Properties[k]
			if p == nil && s.AdditionalProperties.Schema != nil {
				p = s.AdditionalProperties.Schema
			}
			if p == nil {
				continue
			}
			if len(p.Value.Enum) > 0 {
				if _, ok := x.(string); ok {
					v[k] = p.Value.Enum[0]
					continue
				}
			}
			fixEnums(p.Value, x)
		}
	case []any:
		if s.Items == nil {
			return
		}
		for i, x := range v {
			if len(s.Items.Value.Enum) > 0 {
				v[i] = s.Items.Value.Enum[0]
				continue
			}
			fixEnums(s.Items.Value, x)
		}
	}
}

// TestRequestValidator sends requests through the middleware to a handler
// that echoes the body it reads.
func TestRequestValidator(t *testing.T) {
	t.Parallel()
	router, err := openapi.NewRouter()
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	echoBody := func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.Blob(http.StatusTeapot, "application/json", body)
	}
	validate := openapi.RequestValidator(router)
	e.Any("/*", echoBody, validate)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)

	type errBody struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Field   string `json:"field"`
		Fields  []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"fields"`
	}
	tests := []struct {
		name, method, path, contentType, body string
		status                                int    // 418: passed to the handler
		field                                 string // the first bad field
		fields                                int
		message                               string // what the message says, when given
	}{
		{name: "broker", method: "POST", path: "/brokers", body: `{"name":"b","url":"http://x","auth":{"basic":{"username":"u","password":"p"}}}`, status: 418},
		{name: "broker unknown field", method: "POST", path: "/brokers", body: `{"name":"b","url":"http://x","colour":"red"}`, status: 400, field: "colour"},
		{name: "broker missing url", method: "POST", path: "/brokers", body: `{"name":"b"}`, status: 400, field: "url"},
		{name: "broker bad name and auth", method: "POST", path: "/brokers", body: `{"name":"B!","url":"http://x","auth":{"basic":{"username":"u"}}}`, status: 400, field: "auth.basic.password", fields: 2},
		{name: "broker nested unknown", method: "POST", path: "/brokers", body: `{"name":"b","url":"http://x","catalogRestrictions":{"serviceClass":["a"],"x":1}}`, status: 400, field: "catalogRestrictions.x"},
		{name: "broker array item", method: "POST", path: "/brokers", body: `{"name":"b","url":"http://x","catalogRestrictions":{"serviceClass":[1]}}`, status: 400, field: "catalogRestrictions.serviceClass[0]"},
		{name: "no body", method: "POST", path: "/brokers", status: 400},
		{name: "not JSON", method: "POST", path: "/brokers", body: `{"name":`, status: 400},
		{name: "wrong content type", method: "POST", path: "/brokers", contentType: "text/plain", body: `{}`, status: 415, field: "Content-Type"},
		{name: "limit", method: "GET", path: "/brokers?limit=10", status: 418},
		{name: "limit empty", method: "GET", path: "/brokers?limit=", status: 418},
		{name: "limit too big", method: "GET", path: "/brokers?limit=1001", status: 400, field: "limit"},
		{name: "limit not a number", method: "GET", path: "/serviceplans?limit=ten", status: 400, field: "limit", message: `limit: must be an integer, not "ten"`},
		{name: "free not a boolean", method: "GET", path: "/serviceplans?free=maybe", status: 400, field: "free", message: `free: must be true or false, not "maybe"`},
		{name: "free", method: "GET", path: "/serviceplans?free=true&includeRemoved=1", status: 418},
		{name: "free not boolean", method: "GET", path: "/serviceplans?free=maybe", status: 400, field: "free"},
		{name: "broker patch", method: "PATCH", path: "/brokers/b", contentType: "application/merge-patch+json", body: `{"relistDuration":null,"labels":{"a":null},"auth":{"bearer":{"token":"t"}}}`, status: 418},
		{name: "broker patch as JSON", method: "PATCH", path: "/brokers/b", body: `{"url":"http://y"}`, status: 418},
		{name: "broker patch unknown", method: "PATCH", path: "/brokers/b", body: `{"spec":{}}`, status: 400, field: "spec"},
		{name: "instance", method: "POST", path: "/instances", body: `{"name":"db","spec":{"clusterServiceClassExternalName":"c","clusterServicePlanExternalName":"p","parameters":{"x":1}}}`, status: 418},
		{name: "instance parameters not object", method: "POST", path: "/instances", body: `{"name":"db","spec":{"parameters":"x"}}`, status: 400, field: "spec.parameters"},
		{name: "instance bad namespace", method: "POST", path: "/instances", body: `{"name":"db","namespace":"Not OK","spec":{}}`, status: 400, field: "namespace"},
		{name: "instance patch", method: "PATCH", path: "/instances/x", contentType: "application/merge-patch+json", body: `{"spec":{"parameters":{"x":null},"clusterServicePlanExternalName":"big"}}`, status: 418},
		{name: "instance patch unknown", method: "PATCH", path: "/instances/x", contentType: "application/merge-patch+json", body: `{"spec":{"plan":"big"}}`, status: 400, field: "spec.plan"},
		{name: "binding", method: "POST", path: "/bindings", body: `{"name":"app","spec":{"instanceRef":{"name":"db"},"secretTransforms":[{"addKey":{"key":"k","value":"eA=="}}]}}`, status: 418},
		{name: "binding without instance", method: "POST", path: "/bindings", body: `{"name":"app","spec":{}}`, status: 400, field: "spec.instanceRef"},
		{name: "binding transform", method: "POST", path: "/bindings", body: `{"name":"app","spec":{"instanceRef":{"name":"db"},"secretTransforms":[{"renameKey":{"from":"a"}}]}}`, status: 400, field: "spec.secretTransforms[0].renameKey.to"},
		{name: "unknown route", method: "GET", path: "/nothing?limit=x", status: 418},
		{name: "unknown method", method: "PUT", path: "/brokers/b", body: `{"x":1}`, status: 418},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req, err := http.NewRequest(tt.method, srv.URL+"/api/v1"+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if ct := tt.contentType; ct != "" {
				req.Header.Set("Content-Type", ct)
			} else if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, raw)
			}
			if tt.status == http.StatusTeapot {
				if string(raw) != tt.body {
					t.Errorf("the handler read %q, want %q", raw, tt.body)
				}
				return
			}
			var eb errBody
			if err := json.Unmarshal(raw, &eb); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			code := "invalid"
			if tt.status == http.StatusUnsupportedMediaType {
				code = "unsupported_media_type"
			}
			if eb.Error != code || eb.Message == "" || eb.Field != tt.field {
				t.Errorf("error %q, field %q (want %q), message %q", eb.Error, eb.Field, tt.field, eb.Message)
			}
			if tt.message != "" && eb.Message != tt.message {
				t.Errorf("message %q, want %q", eb.Message, tt.message)
			}
			if tt.fields > 0 && len(eb.Fields) != tt.fields {
				t.Errorf("%d fields, want %d: %s", len(eb.Fields), tt.fields, raw)
			}
			if strings.Contains(eb.Message, "Schema:") || strings.Contains(eb.Message, "Value:") {
				t.Errorf("the message repeats the schema or value: %q", eb.Message)
			}
			t.Logf("%s", raw)
		})
	}
}

// TestNDJSONResponses: an export's body is validated line by line, each
// line an object of the kind: lines that are not, several values on one
// line and a last line without its newline are refused.
func TestNDJSONResponses(t *testing.T) {
	t.Parallel()
	router, err := openapi.NewRouter()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/v1/export/instances", nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	in, err := json.Marshal(catalog.Instance{Status: catalog.InstanceStatus{DeprovisionStatus: "Required"}})
	if err != nil {
		t.Fatal(err)
	}
	line := string(in) + "\n"
	for body, valid := range map[string]bool{
		"":                                   true,
		line:                                 true,
		line + line:                          true,
		`{"bogus":1}` + "\n":                 false,
		string(in) + " " + string(in) + "\n": false,
		line + string(in):                    false,
		line + "\n":                          false,
	} {
		input := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: openapi.ValidationOptions()},
			Status:                 http.StatusOK,
			Header:                 http.Header{"Content-Type": {"application/x-ndjson"}},
			Options:                openapi.ValidationOptions(),
		}
		input.SetBodyBytes([]byte(body))
		if err := openapi3filter.ValidateResponse(context.Background(), input); (err == nil) != valid {
			t.Errorf("%.80q: %v, want valid %v", body, err, valid)
		}
	}
}
