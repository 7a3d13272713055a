// Package openapi holds the OpenAPI 3 description of the catalog's REST API
// (openapi.yaml, the source the server is checked against) and the
// kin-openapi validation built on it: a request-validating echo middleware
// here, and a validating http.RoundTripper for tests in openapitest.
package openapi

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/internal/jsondepth"
)

// Spec is the OpenAPI document, as YAML.
//
//go:embed openapi.yaml
var Spec []byte

// maxBody is how much of a request body is validated; the server reads no
// more than this either (restapi), so a longer body fails there.
const maxBody = 4 << 20

// NDJSON is the media type of newline-delimited JSON, which the exports
// answer: one JSON value a line.
const NDJSON = "application/x-ndjson"

// The document describes an NDJSON body as the array of its lines' values,
// which is what the validation decodes it to.
func init() { openapi3filter.RegisterBodyDecoder(NDJSON, ndjsonDecoder) }

// ndjsonDecoder decodes an NDJSON body: each line one JSON value (a line
// of several values, or none, is an error), every line ended by '\n'.
func ndjsonDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	out := []any{}
	r := bufio.NewReader(body)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			return out, nil
		}
		if err != nil {
			return nil, &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Cause: fmt.Errorf("line %d: %w", n, err)}
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Cause: fmt.Errorf("line %d: %w", n, err)}
		}
		if dec.More() {
			return nil, &openapi3filter.ParseError{Kind: openapi3filter.KindInvalidFormat, Cause: fmt.Errorf("line %d: more than one JSON value", n)}
		}
		out = append(out, v)
	}
}

var load = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(Spec)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	return doc, nil
})

// Load returns the parsed and validated document. It is loaded once and
// shared: treat it as read-only.
func Load() (*openapi3.T, error) { return load() }

// NewRouter returns a router that finds the operation of a request to the
// API, for openapi3filter's validation.
func NewRouter() (routers.Router, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	return gorillamux.NewRouter(doc)
}

// ValidationOptions are the options of every validation against the
// document: security is not validated (the server authenticates, and
// decides 401 and 403 before anything else), no defaults are written into
// the request, and errors do not repeat the values they are about (which may
// be secrets).
func ValidationOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults:     true,
		MultiError:              true,
		IncludeResponseStatus:   true,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
	}
}

// errorBody is the API's error body (restapi APIError).
type errorBody struct {
	Code    string       `json:"error"`
	Message string       `json:"message"`
	Field   string       `json:"field,omitempty"`
	Fields  []fieldError `json:"fields,omitempty"`
}

type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// RequestValidator returns an echo middleware that validates each request's
// path and query parameters and body against the document and answers 400
// with the API's error body `{"error": "invalid", "message", "field",
// "fields"}` when they do not match. The body is given back to the handler
// unchanged. Requests for routes the document does not have pass through,
// so the server answers them itself.
//
// Security is not validated. Since the API decides 401 and 403 before it
// reads the body, install the validator after authentication (as route
// middleware after the role check), not with e.Use before it.
func RequestValidator(router routers.Router) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			route, params, err := router.FindRoute(req)
			if err != nil {
				return next(c)
			}
			body, err := readBody(req)
			if err != nil {
				return c.JSON(http.StatusBadRequest, errorBody{Code: "invalid", Message: "request body: " + err.Error()})
			}
			if len(body) > maxBody {
				return next(c) // too long for the API: the server refuses it
			}
			if jsondepth.Exceeds(body, jsondepth.Max) {
				// Merge patches are applied in time that grows with the
				// square of their depth (restapi's, as k8s.io/apiserver's).
				return c.JSON(http.StatusBadRequest, errorBody{Code: "invalid",
					Message: fmt.Sprintf("request body: nests deeper than %d levels of objects and arrays", jsondepth.Max)})
			}
			if err := undeclaredQuery(req, route); err != nil {
				return c.JSON(http.StatusBadRequest, describe(err))
			}
			if len(body) > 0 && route.Operation.RequestBody == nil {
				// It would be ignored, and the client left to think that
				// what it sent ({"force":true} to a delete) was heeded.
				return c.JSON(http.StatusBadRequest, errorBody{Code: "invalid",
					Message: fmt.Sprintf("request body: %s %s takes no body: send none", req.Method, req.URL.Path)})
			}
			if len(body) > 0 {
				if status, eb, ok := unsupportedBodyType(req, route, c.Response().Header()); ok {
					return c.JSON(status, eb)
				}
			}
			if err := validateRequest(req.Context(), req, body, route, params); err != nil {
				return c.JSON(http.StatusBadRequest, describe(err))
			}
			return next(c)
		}
	}
}

// readBody reads req's body (up to a little more than the API reads) and
// puts back a body that gives the same bytes again, whole. It returns nil
// when the request has no body.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	rest := req.Body
	req.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	if err != nil {
		return nil, err
	}
	if body == nil {
		body = []byte{}
	}
	return body, nil
}

// undeclaredQuery refuses the query parameters route's operation does not
// take: one spelt wrong, or a filter the operation does not have
// (labelSelector on a list of instances), would otherwise be ignored, and
// the client sent everything as if it had been applied.
func undeclaredQuery(req *http.Request, route *routers.Route) error {
	var takes []string
	for _, ps := range []openapi3.Parameters{route.PathItem.Parameters, route.Operation.Parameters} {
		for _, p := range ps {
			if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
				takes = append(takes, p.Value.Name)
			}
		}
	}
	sort.Strings(takes)
	these := "none"
	if len(takes) > 0 {
		these = strings.Join(takes, ", ")
	}
	var errs openapi3.MultiError
	query := req.URL.Query()
	for _, name := range slices.Sorted(maps.Keys(query)) {
		// No parameter of the API is a list: a second value would be
		// dropped without a word.
		switch {
		case !slices.Contains(takes, name):
			errs = append(errs, &openapi3filter.RequestError{
				Parameter: &openapi3.Parameter{Name: name, In: openapi3.ParameterInQuery},
				Err:       fmt.Errorf("this request takes no such query parameter (it takes: %s)", these),
			})
		case len(query[name]) > 1:
			errs = append(errs, &openapi3filter.RequestError{
				Parameter: &openapi3.Parameter{Name: name, In: openapi3.ParameterInQuery},
				Err:       fmt.Errorf("is given %d times: give it once", len(query[name])),
			})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// unsupportedBodyType refuses a body sent as a type route's operation
// does not take: 415 for none named, one that is no media type, one not
// listed for the operation's body, or JSON in a charset other than UTF-8
// (RFC 8259 8.1: JSON is UTF-8, and it is read as such); 400 for two
// Content-Types (RFC 9110 5.3: it is no list). kin-openapi's own check
// answered 400 in words of its own, and took any charset. A body in a
// content coding (gzip, br) is a 415 with Accept-Encoding: identity in
// header (RFC 9110 15.5.16): nothing decodes it, and it was read as it
// came.
func unsupportedBodyType(req *http.Request, route *routers.Route, header http.Header) (int, errorBody, bool) {
	rb := route.Operation.RequestBody
	if rb == nil || rb.Value == nil {
		return 0, errorBody{}, false
	}
	takes := strings.Join(slices.Sorted(maps.Keys(rb.Value.Content)), " or ")
	// refuse answers status naming the header at fault.
	refuse := func(status int, name, format string, args ...any) (int, errorBody, bool) {
		code := "unsupported_media_type"
		if status == http.StatusBadRequest {
			code = "invalid"
		}
		msg := fmt.Sprintf(format, args...)
		return status, errorBody{Code: code, Message: name + ": " + msg, Field: name,
			Fields: []fieldError{{Field: name, Message: msg}}}, true
	}
	for _, v := range req.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				header.Set("Accept-Encoding", "identity")
				return refuse(http.StatusUnsupportedMediaType, "Content-Encoding", "%q is not taken: send the body as it is (identity)", coding)
			}
		}
	}
	const ct = "Content-Type"
	values := req.Header.Values(ct)
	switch {
	case len(values) > 1:
		return refuse(http.StatusBadRequest, ct, "is given %d times: give it once (this request takes %s)", len(values), takes)
	case len(values) == 0 || strings.TrimSpace(values[0]) == "":
		return refuse(http.StatusUnsupportedMediaType, ct, "required with a body: this request takes %s", takes)
	}
	mt, params, err := mime.ParseMediaType(values[0])
	switch {
	case err != nil:
		return refuse(http.StatusUnsupportedMediaType, ct, "%q is no media type: this request takes %s", values[0], takes)
	case rb.Value.Content.Get(mt) == nil || strings.Contains(mt, "*"):
		return refuse(http.StatusUnsupportedMediaType, ct, "this request takes %s, not %s", takes, mt)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return refuse(http.StatusUnsupportedMediaType, ct, "charset %q is not taken: this request takes %s in UTF-8 (charset=utf-8, or none)", cs, takes)
	}
	return 0, errorBody{}, false
}

// validateRequest validates req, whose body is body, against route. It
// works on a copy of req, so req itself is left as it was.
func validateRequest(ctx context.Context, req *http.Request, body []byte, route *routers.Route, params map[string]string) error {
	vreq := req.Clone(ctx)
	vreq.Body, vreq.GetBody, vreq.ContentLength = http.NoBody, nil, 0
	if body != nil {
		vreq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		vreq.Body, _ = vreq.GetBody()
		vreq.ContentLength = int64(len(body))
	}
	return openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{
		Request:    vreq,
		PathParams: params,
		Route:      route,
		Options:    ValidationOptions(),
	})
}

// describe turns a request validation error into the API's error body:
// every problem with its field (a dotted path into the body, such as
// spec.instanceRef.name, or a parameter's name), the first one in field.
func describe(err error) errorBody {
	var probs []fieldError
	seen := map[fieldError]bool{}
	add := func(p fieldError) {
		if !seen[p] {
			seen[p] = true
			probs = append(probs, p)
		}
	}
	var walk func(error)
	walk = func(err error) {
		var re *openapi3filter.RequestError
		if me, ok := err.(openapi3.MultiError); ok {
			for _, e := range me {
				walk(e)
			}
			return
		}
		switch {
		case errors.As(err, &re):
			switch {
			case re.Parameter != nil:
				add(fieldError{re.Parameter.Name, parameterMessage(re)})
			case re.RequestBody != nil && hasSchemaError(re.Err):
				for _, p := range schemaProblems(re.Err) {
					add(p)
				}
			case re.RequestBody != nil && errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
				add(fieldError{"", "request body: a JSON object is required"})
			case re.RequestBody != nil && re.Reason == "failed to decode request body":
				add(fieldError{"", "request body: is not a JSON document (" + bodyCause(re.Err) + ")"})
			default:
				add(fieldError{"", "request body: " + re.Error()})
			}
		default:
			add(fieldError{"", err.Error()})
		}
	}
	walk(err)
	// Problems without a field last; the rest in a stable order.
	sort.SliceStable(probs, func(i, j int) bool {
		a, b := probs[i].Field, probs[j].Field
		return a != "" && (b == "" || a < b)
	})
	out := errorBody{Code: "invalid"}
	msgs := make([]string, 0, len(probs))
	for _, p := range probs {
		if p.Field == "" {
			msgs = append(msgs, strings.TrimPrefix(p.Message, "request body: request body has an error: "))
			continue
		}
		msgs = append(msgs, p.Field+": "+p.Message)
		if out.Field == "" {
			out.Field = p.Field
		}
		out.Fields = append(out.Fields, p)
	}
	out.Message = strings.Join(msgs, "; ")
	return out
}

// bodyCause is what a body that is no JSON document has wrong, without
// the decoder's own framing.
func bodyCause(err error) string {
	var pe *openapi3filter.ParseError
	if errors.As(err, &pe) && pe.Cause != nil {
		return pe.Cause.Error()
	}
	return err.Error()
}

func parameterMessage(re *openapi3filter.RequestError) string {
	var se *openapi3.SchemaError
	var pe *openapi3filter.ParseError
	switch {
	case errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
		return "required"
	case errors.Is(re.Err, openapi3filter.ErrInvalidEmptyValue):
		return "must not be empty"
	case errors.As(re.Err, &se) && invalidMessage(se.Schema) != "":
		// The words the server uses, not the regular expression.
		return invalidMessage(se.Schema)
	case errors.As(re.Err, &se) && se.Reason != "":
		return se.Reason
	case errors.As(re.Err, &pe) && pe.Kind == openapi3filter.KindInvalidFormat && parameterType(re) != "":
		// "value ten: an invalid integer: invalid syntax" is Go's.
		return fmt.Sprintf("must be %s, not %.40q", parameterType(re), fmt.Sprint(pe.Value))
	case errors.As(re.Err, &pe):
		return pe.Error()
	case re.Err != nil:
		return re.Err.Error()
	}
	return re.Reason
}

// parameterType is what a parameter's schema says it is, as a noun with
// its article ("an integer"); "" when it says nothing simple.
func parameterType(re *openapi3filter.RequestError) string {
	if re.Parameter == nil || re.Parameter.Schema == nil || re.Parameter.Schema.Value == nil {
		return ""
	}
	t := re.Parameter.Schema.Value.Type
	switch {
	case t.Is(openapi3.TypeInteger):
		return "an integer"
	case t.Is(openapi3.TypeNumber):
		return "a number"
	case t.Is(openapi3.TypeBoolean):
		return "true or false"
	}
	return ""
}

func hasSchemaError(err error) bool {
	var se *openapi3.SchemaError
	return errors.As(err, &se)
}

// schemaProblems lists the innermost schema errors in err, each with the
// dotted path of the value it is about.
func schemaProblems(err error) []fieldError {
	var out []fieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case openapi3.MultiError:
			for _, x := range e {
				walk(x)
			}
		case *openapi3.SchemaError:
			if e.SchemaField == "allOf" && e.Origin != nil && hasSchemaError(e.Origin) {
				walk(e.Origin)
				return
			}
			out = append(out, schemaProblem(e))
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

func schemaProblem(se *openapi3.SchemaError) fieldError {
	path := se.JSONPointer()
	msg := se.Reason
	switch {
	case len(path) == 0 && (se.SchemaField == "type" || se.SchemaField == "nullable") && se.Schema != nil && se.Schema.Type.Is(openapi3.TypeObject):
		// The body itself is no object ([], null, "x"): kin-openapi's
		// words ("value must be an object") name nothing.
		return fieldError{Message: "request body: must be a JSON object"}
	case se.SchemaField == "required":
		msg = "required"
	case se.SchemaField == "properties" && strings.HasSuffix(msg, " is unsupported"):
		if name, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(msg, "property "), " is unsupported")); err == nil {
			path = append(path, name)
			msg = "unknown field"
		}
	case invalidMessage(se.Schema) != "":
		msg = invalidMessage(se.Schema)
	case msg == "":
		msg = fmt.Sprintf("does not match the schema (%s)", se.SchemaField)
	}
	return fieldError{Field: Dotted(path), Message: msg}
}

// invalidMessage is what a schema's x-bindery-invalid says of a value it
// refuses, so that the validator speaks as the server does.
func invalidMessage(s *openapi3.Schema) string {
	if s == nil {
		return ""
	}
	msg, _ := s.Extensions["x-bindery-invalid"].(string)
	return msg
}

// Dotted writes a JSON pointer's tokens as the API names fields:
// spec.catalogRestrictions.serviceClass[0].
func Dotted(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
