// Package restapi is the catalog's REST API under /api/v1 (described in
// openapi/openapi.yaml): brokers, the marketplace of classes and plans,
// instances, bindings, credentials and history. It calls the catalog's
// domain layer for everything; no SQL lives here.
package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
	"github.com/bindery-dev/bindery/internal/pgtext"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/internal/share"
	"github.com/bindery-dev/bindery/openapi"
)

// Server serves the REST API.
type Server struct {
	store *catalog.Store
	log   *slog.Logger
	// tokens checks bearer tokens, keeping them while Run listens for
	// their removal.
	tokens *catalog.TokenCache
	// blockedAfter is how long an object may wait for something missing
	// before its progress says blocked (SetBlockedAfter).
	blockedAfter time.Duration
	// exports holds a slot for each export being served (export.go);
	// exporting, the tokens reading one (one each).
	exports   chan struct{}
	exportMu  sync.Mutex
	exporting map[string]bool
	// share bounds each token's requests served at once, here and in
	// what is mounted beside the API (internal/share).
	share *share.Share
}

// New returns a REST API server over store. Until Run is called, it checks
// every request's token in the database.
func New(store *catalog.Store, log *slog.Logger) *Server {
	return &Server{store: store, log: log, tokens: store.NewTokenCache(0), exports: make(chan struct{}, DefaultExports), exporting: map[string]bool{},
		share: share.New(DefaultMaxInflightPerToken)}
}

// SetMaxInflightPerToken sets how many requests one token may have
// served at once, and as many waiting (0: no bound).
func (s *Server) SetMaxInflightPerToken(n int) { s.share = share.New(n) }

// Share is the bound on each token's requests, for the doors mounted
// beside the API (the web UI): a token is one party whichever it uses.
func (s *Server) Share() *share.Share { return s.share }

// Metrics is the collector of the requests each token has served and
// waiting.
func (s *Server) Metrics() prometheus.Collector { return s.share }

// Run keeps the tokens the server checked, and listens for their removal,
// until ctx ends: a request then costs no database read for its token, and
// a revoked token still stops working at once on every server.
func (s *Server) Run(ctx context.Context) { s.tokens.Run(ctx) }

// Register mounts the API on e under /api/v1. Every request is checked
// against openapi/openapi.yaml after its token and role, before its
// handler.
func (s *Server) Register(e *echo.Echo) {
	g := e.Group("/api/v1")
	router, err := openapi.NewRouter()
	if err != nil {
		panic(fmt.Sprintf("rest: the embedded OpenAPI document is invalid: %v", err))
	}
	validate := openapi.RequestValidator(router)
	role := func(r string) echo.MiddlewareFunc {
		check := s.require(r)
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return check(storableParams(validate(recordWarnings(next))))
		}
	}
	viewer, developer, admin := role(catalog.RoleViewer), role(catalog.RoleDeveloper), role(catalog.RoleAdmin)

	// Lists, events and exports are compressed for clients that ask. A
	// binding's credentials never are: secrets are not compressed beside
	// what a client chooses.
	gz := compressed()
	clusterAdmin := func(next echo.HandlerFunc) echo.HandlerFunc { return admin(clusterWide(next)) }
	clusterViewer := func(next echo.HandlerFunc) echo.HandlerFunc { return viewer(clusterWide(next)) }
	// A broker's scope (the cluster, or a namespace) decides which admin
	// tokens may change it: the handlers check it once they know it.
	g.POST("/brokers", s.createBroker, admin)
	g.GET("/brokers", s.listBrokers, viewer, gz)
	g.GET("/brokers/:id", s.getBroker, viewer)
	g.PATCH("/brokers/:id", s.updateBroker, admin)
	g.DELETE("/brokers/:id", s.deleteBroker, admin)
	g.POST("/brokers/:id/relist", s.relistBroker, admin)
	g.GET("/brokers/:id/events", s.brokerEvents, viewer, gz)

	g.GET("/serviceclasses", s.listClasses, viewer, gz)
	g.GET("/serviceclasses/:id", s.getClass, viewer)
	g.GET("/serviceplans", s.listPlans, viewer, gz)
	g.GET("/serviceplans/:id", s.getPlan, viewer)
	g.GET("/serviceplans/:id/schemas", s.planSchemas, viewer)
	g.GET("/serviceplans/:id/visibility", s.getPlanVisibility, clusterViewer)
	g.PUT("/serviceplans/:id/visibility", s.setPlanVisibility, clusterAdmin)
	g.DELETE("/serviceplans/:id/visibility", s.deletePlanVisibility, clusterAdmin)

	g.POST("/instances", s.createInstance, developer)
	g.GET("/instances", s.listInstances, viewer, gz)
	g.GET("/instances/:id", s.getInstance, viewer)
	g.PATCH("/instances/:id", s.updateInstance, developer)
	g.DELETE("/instances/:id", s.deleteInstance, developer)
	g.POST("/instances/:id/abandon", s.abandonInstance, developer)
	g.GET("/instances/:id/events", s.instanceEvents, viewer, gz)

	g.POST("/bindings", s.createBinding, developer)
	g.GET("/bindings", s.listBindings, viewer, gz)
	g.GET("/bindings/:id", s.getBinding, viewer)
	g.DELETE("/bindings/:id", s.deleteBinding, developer)
	g.POST("/bindings/:id/abandon", s.abandonBinding, developer)
	g.GET("/bindings/:id/credentials", s.credentials, developer)
	g.GET("/bindings/:id/events", s.bindingEvents, viewer, gz)

	g.GET("/namespaces", s.listNamespaces, viewer)

	// Every object of a kind, from one snapshot, streamed (export.go).
	g.GET("/export/instances", s.exportInstances, viewer, gz)
	g.GET("/export/bindings", s.exportBindings, viewer, gz)
	g.GET("/export/brokers", s.exportBrokers, viewer, gz)

	// Quotas are set by admins for all namespaces; a namespace's tokens
	// read what limits it.
	g.GET("/quotas", s.listQuotas, clusterViewer)
	g.GET("/quotas/:namespace", s.getQuota, clusterViewer)
	g.PUT("/quotas/:namespace", s.setQuota, clusterAdmin)
	g.DELETE("/quotas/:namespace", s.deleteQuota, clusterAdmin)
	g.GET("/quotas/:namespace/usage", s.quotaUsage, viewer)

	g.POST("/tokens", s.createToken, clusterAdmin)
	g.GET("/tokens", s.listTokens, clusterAdmin)
	g.DELETE("/tokens/:id", s.revokeToken, clusterAdmin)

	// What no route takes is answered here, as JSON, rather than by what
	// is mounted beside the API at / (the web UI's pages).
	g.Any("", unrouted(e))
	g.Any("/*", unrouted(e))
}

// unrouted answers a request no route of the API takes: 405 with Allow when
// the path is one of the API's under another method, else 404.
func unrouted(e *echo.Echo) echo.HandlerFunc {
	return func(c echo.Context) error {
		path := strings.Split(strings.TrimSuffix(c.Request().URL.Path, "/"), "/")
		var allow []string
		for _, r := range e.Routes() {
			if r.Method != echo.RouteNotFound && r.Method != c.Request().Method && !strings.HasSuffix(r.Path, "*") &&
				strings.HasPrefix(r.Path, "/api/v1/") && routeMatches(strings.Split(r.Path, "/"), path) && !slices.Contains(allow, r.Method) {
				allow = append(allow, r.Method)
			}
		}
		if len(allow) == 0 {
			return apiError(http.StatusNotFound, "not_found", "%s %s: no such path in the API (openapi/openapi.yaml lists them)", c.Request().Method, c.Request().URL.Path)
		}
		slices.Sort(allow)
		c.Response().Header().Set("Allow", strings.Join(allow, ", "))
		return apiError(http.StatusMethodNotAllowed, "method_not_allowed", "%s %s: the path takes %s", c.Request().Method, c.Request().URL.Path, strings.Join(allow, ", "))
	}
}

// routeMatches tells whether a route's path segments (":name" for any)
// match a request's.
func routeMatches(route, path []string) bool {
	if len(route) != len(path) {
		return false
	}
	for i, seg := range route {
		if !strings.HasPrefix(seg, ":") && seg != path[i] {
			return false
		}
	}
	return true
}

// APIError is the body of every error: a code, a message and, for bad
// input, the field (and every field when there are several).
type APIError struct {
	Status  int          `json:"-"`
	Code    string       `json:"error"`
	Message string       `json:"message"`
	Field   string       `json:"field,omitempty"`
	Fields  []FieldError `json:"fields,omitempty"`
}

// FieldError is one problem with one field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// invalidRequest is the body of a request the catalog found invalid: every
// field error, the first one's field named at the top.
func invalidRequest(v *catalog.ValidationError) *APIError {
	ae := &APIError{Status: http.StatusBadRequest, Code: "invalid", Message: v.Sentence()}
	for _, fe := range v.Errors {
		ae.Fields = append(ae.Fields, FieldError{Field: fe.Field, Message: catalog.FieldMessage(fe)})
	}
	if len(ae.Fields) > 0 {
		ae.Field = ae.Fields[0].Field
	}
	return ae
}

func (e *APIError) Error() string { return e.Message }

func apiError(status int, code, format string, args ...any) *APIError {
	return &APIError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorHandler writes every error of the API as an APIError; the details
// of unexpected ones go to the log only.
func (s *Server) ErrorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *APIError
	var he *echo.HTTPError
	var fc *catalog.FieldConflictError
	q, quota := catalog.AsQuota(err)
	switch v, ok := catalog.AsValidation(err); {
	case errors.As(err, &ae):
	case ok:
		ae = invalidRequest(v)
	case quota:
		// The sentence every door shows.
		ae = &APIError{Status: http.StatusForbidden, Code: "quota_exceeded", Message: q.Error()}
	case errors.As(err, &fc):
		msg, _ := catalog.ProblemMessage(fc)
		ae = &APIError{Status: http.StatusConflict, Code: "conflict", Message: msg, Field: fc.Field}
	case errors.Is(err, catalog.ErrNotFound):
		ae = apiError(http.StatusNotFound, "not_found", "%s", notFoundMessage(c))
	case errors.Is(err, catalog.ErrConflict):
		ae = apiError(http.StatusConflict, "conflict", "%s", problem(err, "It conflicts with the object's current state: read it again and retry."))
	case errors.Is(err, catalog.ErrUnprocessable):
		ae = apiError(http.StatusUnprocessableEntity, "unprocessable", "%s", problem(err, "The object's current state does not allow this."))
	case catalog.IsUnavailable(err):
		s.log.WarnContext(c.Request().Context(), "database unavailable", "method", c.Request().Method, "path", c.Path(), "error", err)
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
		ae = apiError(http.StatusServiceUnavailable, "unavailable", "The database cannot be reached right now; try again in %s seconds.", retryAfterSeconds)
	case c.Request().Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// The request's own context ended: the server is stopping (or the
		// client left); nothing failed that a retry would not fix.
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
		ae = apiError(http.StatusServiceUnavailable, "unavailable", "The request was cut short (the server is stopping); try again in %s seconds.", retryAfterSeconds)
	case errors.As(err, &he):
		msg := http.StatusText(he.Code)
		if m, ok := he.Message.(string); ok {
			msg = m
		}
		code := strings.ToLower(strings.ReplaceAll(http.StatusText(he.Code), " ", "_"))
		ae = apiError(he.Code, code, "%s", msg)
	default:
		s.log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method, "path", c.Path(), "error", err)
		ae = apiError(http.StatusInternalServerError, "internal", "The request failed; the server's log has the details.")
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ae.Status)
		return
	}
	_ = c.JSON(ae.Status, ae)
}

// problem is the sentence a typed catalog error carries, or fallback for
// one that carries none.
func problem(err error, fallback string) string {
	if msg, ok := catalog.ProblemMessage(err); ok {
		return msg
	}
	return fallback
}

// notFoundMessage says what was looked for: an id, or a name — and in
// which namespace: for instances and bindings (lookup) a name without
// ?namespace= is looked for in "default"; for brokers, classes and plans
// (lookupScoped) among the cluster's.
func notFoundMessage(c echo.Context) string {
	id := c.Param("id")
	if id == "" {
		return message.Gone("")
	}
	resource := strings.Split(strings.TrimPrefix(c.Path(), "/api/v1/"), "/")[0]
	if catalog.IsID(id) {
		return message.NotFoundID(resource, id)
	}
	ns := c.QueryParam("namespace")
	if ns == "" && (resource == "instances" || resource == "bindings") {
		ns = catalog.DefaultNamespace
	}
	return message.NotFound(resource, id, ns)
}

// require authenticates the bearer token and checks its role before
// anything of the request body is read.
func (s *Server) require(role string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token, headers, ok := serve.Bearer(c.Request())
			if headers > 1 {
				// Which one to take would be a guess (RFC 9110 11.6.2
				// allows one credential).
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="bindery", error="invalid_request"`)
				return apiError(http.StatusUnauthorized, "unauthorized", "The request has %d Authorization headers: send one Authorization header, Authorization: Bearer <token>.", headers)
			}
			if !ok {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="bindery"`)
				return apiError(http.StatusUnauthorized, "unauthorized", "An API token is required: send Authorization: Bearer <token> (create one with `bindery token create --role viewer|developer|admin`).")
			}
			tok, err := s.tokens.Lookup(c.Request().Context(), token)
			if errors.Is(err, catalog.ErrBadToken) {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="bindery", error="invalid_token"`)
				return apiError(http.StatusUnauthorized, "unauthorized", "The API token is not valid (unknown, revoked or expired).")
			}
			if err != nil {
				return err
			}
			if !catalog.Allows(tok.Role, role) {
				return apiError(http.StatusForbidden, "forbidden", "This needs the %s role; the token has the %s role.", role, tok.Role)
			}
			c.Set(tokenKey, tok)
			return s.serveShared(c, tok.ID, next)
		}
	}
}

// retryAfterSeconds is what a 503 asks clients to wait: about how long a
// database fail-over or restart takes.
const retryAfterSeconds = "5"

// maxBody is the largest request body the API reads.
const maxBody = 4 << 20

// storableParams refuses path and query parameters that PostgreSQL cannot
// hold (NUL characters, invalid UTF-8), naming the parameter.
func storableParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for i, name := range c.ParamNames() {
			if err := pgtext.Check(name, c.ParamValues()[i]); err != nil {
				return invalidText(err)
			}
		}
		for name, values := range c.QueryParams() {
			for _, v := range append([]string{name}, values...) {
				if err := pgtext.Check(name, v); err != nil {
					return invalidText(err)
				}
			}
		}
		return next(c)
	}
}

func invalidText(err error) error {
	var te *pgtext.Error
	if errors.As(err, &te) {
		return &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: te.Field, Message: te.Error()}
	}
	return err
}

// decode reads a JSON body strictly: unknown fields are errors naming the
// field, so typos do not pass silently. A body over maxBody is a 413.
func decode(c echo.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeBytes(body, v)
}

// readBody reads a request body of at most maxBody bytes; a longer one is
// a 413 (not cut short, which would make it look like bad JSON).
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxBody+1))
	if err != nil {
		return nil, apiError(http.StatusBadRequest, "invalid", "request body: %v", err)
	}
	if len(body) > maxBody {
		return nil, apiError(http.StatusRequestEntityTooLarge, "too_large", "request body: larger than the limit of %d bytes (4 MiB)", maxBody)
	}
	if name, ok := duplicateName(body); ok {
		return nil, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: name,
			Message: fmt.Sprintf("%s is given more than once: give it once.", message.Capitalise(message.Field(name)))}
	}
	return body, nil
}

// duplicateName finds a name given twice in one object of body, as a
// field path (spec.parameters.n, items[0].key). encoding/json would keep
// the last value without a word; what is no JSON is left to the decoder.
func duplicateName(body []byte) (string, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowInvalidUTF8(true))
	for {
		_, err := dec.ReadToken()
		var se *jsontext.SyntacticError
		switch {
		case err == nil:
			continue
		case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
			return openapi.Dotted(slices.Collect(se.JSONPointer.Tokens())), true
		}
		return "", false
	}
}

func decodeBytes(body []byte, v any) error {
	if err := pgtext.CheckJSON("", body); err != nil {
		return invalidText(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: te.Field,
				Message: fmt.Sprintf("%s must be a JSON %s.", message.Capitalise(message.Field(te.Field)), jsonType(te.Type.Kind()))}
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: field, Message: fmt.Sprintf("This request has no field %q: check its spelling (openapi/openapi.yaml lists the fields).", field)}
		case errors.Is(err, io.EOF):
			return apiError(http.StatusBadRequest, "invalid", "request body: a JSON object is required")
		}
		return apiError(http.StatusBadRequest, "invalid", "request body: %v", err)
	}
	if dec.More() {
		return apiError(http.StatusBadRequest, "invalid", "request body: more than one JSON value")
	}
	return nil
}

// jsonType is how JSON calls the values of a Go kind.
func jsonType(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "object"
	}
	return "number"
}

// listOptions reads limit, continue and namespace.
func listOptions(c echo.Context) (catalog.ListOptions, error) {
	opts := catalog.ListOptions{Namespace: c.QueryParam("namespace"), Continue: c.QueryParam("continue"), Limit: 500}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return opts, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: "limit", Message: "The page size (limit) must be a number from 1 to 1000."}
		}
		opts.Limit = n
	}
	return opts, nil
}

func boolParam(c echo.Context, name string) (*bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: name, Message: fmt.Sprintf("The query parameter %s must be true or false.", name)}
	}
	return &b, nil
}

// ctx is the request's context.
func ctx(c echo.Context) context.Context { return c.Request().Context() }
