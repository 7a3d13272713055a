package broker

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// Auth holds the credentials platforms present: HTTP basic auth (the OSB
// default) and/or a bearer token. Both are compared in constant time.
type Auth struct {
	Username string
	Password string
	Token    string
}

func (a Auth) validate() error {
	switch {
	case (a.Username == "") != (a.Password == ""):
		return errors.New("broker: basic auth needs both a username and a password")
	case a.Username == "" && a.Token == "":
		return errors.New("broker: no credentials: set a username and password (--broker-username, --broker-password) or a token (--broker-token)")
	}
	return nil
}

// equal compares two secrets in constant time, whatever their lengths.
func equal(given, want string) bool {
	g, w := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// middleware answers 401 before anything else of the request is read.
func (a Auth) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get("Authorization")
		ok := false
		switch {
		case a.Token != "" && len(h) > 7 && strings.EqualFold(h[:7], "bearer "):
			ok = equal(h[7:], a.Token)
		case a.Username != "":
			if user, pass, found := c.Request().BasicAuth(); found {
				// Both comparisons always run, so timing tells nothing.
				u, p := equal(user, a.Username), equal(pass, a.Password)
				ok = u && p
			}
		}
		if !ok {
			c.Response().Header().Set("WWW-Authenticate", `Basic realm="bindery broker"`)
			return newError(http.StatusUnauthorized, "Unauthorized", "The request has no valid credentials.")
		}
		return next(c)
	}
}

// Supported OSB versions: 2.13 to 2.17.
const (
	minMinor = 13
	maxMinor = 17
)

// apiVersion enforces X-Broker-API-Version: 400 when missing, 412 when
// outside 2.13–2.17
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#api-version-header).
func apiVersion(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		v := c.Request().Header.Get("X-Broker-API-Version")
		if v == "" {
			return errBadRequest("The X-Broker-API-Version header is required.")
		}
		major, minor, ok := strings.Cut(v, ".")
		n, err := strconv.Atoi(minor)
		if !ok || major != "2" || err != nil || n < minMinor || n > maxMinor {
			return newError(http.StatusPreconditionFailed, "PreconditionFailed",
				"X-Broker-API-Version %q is not supported: use a version from 2.13 to 2.17.", v)
		}
		return next(c)
	}
}

// maxRequestIdentity bounds X-Broker-API-Request-Identity, in bytes. OSB
// suggests a GUID; the bound keeps a caller from making the broker store
// and echo a value of any size with every operation.
const maxRequestIdentity = 255

// requestIdentity echoes X-Broker-API-Request-Identity on the response.
// The value is stored with the request's operation: one PostgreSQL cannot
// hold (invalid UTF-8; net/http already refuses control characters) or
// longer than maxRequestIdentity is refused with 400 naming the header,
// neither echoed nor stored, rather than failing as a 500 when the
// operation is written.
func requestIdentity(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		const header = "X-Broker-API-Request-Identity"
		id := c.Request().Header.Get(header)
		if id == "" {
			return next(c)
		}
		if err := pgtext.Check(header, id); err != nil {
			return errBadRequest("%v", err)
		}
		if len(id) > maxRequestIdentity {
			return errBadRequest("%s: must be at most %d bytes long, not %d", header, maxRequestIdentity, len(id))
		}
		c.Response().Header().Set(header, id)
		return next(c)
	}
}

// identity is a parsed X-Broker-API-Originating-Identity header.
type identity struct {
	Platform string
	Value    json.RawMessage
}

const identityKey = "bindery.originating_identity"

// originatingIdentity parses X-Broker-API-Originating-Identity ("platform
// base64(json object)") and rejects a malformed one with 400.
func originatingIdentity(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get("X-Broker-API-Originating-Identity")
		if h == "" {
			return next(c)
		}
		id, err := parseOriginatingIdentity(h)
		if err != nil {
			return errBadRequest("X-Broker-API-Originating-Identity: %v", err)
		}
		c.Set(identityKey, id)
		return next(c)
	}
}

func parseOriginatingIdentity(h string) (identity, error) {
	platform, value, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || platform == "" || value == "" {
		return identity{}, errors.New(`want "platform base64-encoded-JSON"`)
	}
	value = strings.TrimSpace(value)
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(value); err != nil {
			return identity{}, errors.New("the value is not base64")
		}
	}
	raw = bytes.TrimSpace(raw)
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return identity{}, errors.New("the value is not a base64-encoded JSON object")
	}
	if p := pgtext.Problem(platform); p != "" {
		return identity{}, fmt.Errorf("the platform %s", p)
	}
	if err := pgtext.CheckJSON("value", raw); err != nil {
		return identity{}, err
	}
	return identity{Platform: platform, Value: raw}, nil
}

func originOf(c echo.Context) identity {
	id, _ := c.Get(identityKey).(identity)
	return id
}

// etagMatch implements If-None-Match against one strong ETag.
func etagMatch(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}

type metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	operations *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bindery_broker_requests_total", Help: "OSB requests by route and status code.",
		}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bindery_broker_request_duration_seconds", Help: "OSB request latency.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bindery_broker_operation_duration_seconds", Help: "Operations run by the broker, by kind and result.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10),
		}, []string{"kind", "state"}),
	}
	reg.MustRegister(m.requests, m.latency, m.operations)
	return m
}

func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if e, ok := asError(err); ok {
			status = e.Status
		} else if err != nil {
			status = http.StatusInternalServerError
		}
		route, method := c.Path(), c.Request().Method
		m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
		m.latency.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
		return err
	}
}

// osbParams decodes the path's ids once and refuses ids and query
// parameters Bindery will not store: ids longer than osb.MaxIDLength, and
// anything PostgreSQL cannot hold (NUL characters, invalid UTF-8), with a
// 400 naming the parameter.
//
// Echo matches routes on the raw path when the request's path has escapes
// that its decoded form would not reproduce (r.URL.RawPath), so that an id
// holding %2F stays one segment; its parameters are then still escaped.
// Decoding them here, and only here, gives every handler the id the
// platform meant, however it was encoded.
func osbParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		values := c.ParamValues()
		decoded := make([]string, len(values))
		for i, name := range c.ParamNames() {
			v := values[i]
			if c.Request().URL.RawPath != "" {
				var err error
				if v, err = url.PathUnescape(v); err != nil {
					return errBadRequest("%s: not a valid percent-encoding", name)
				}
			}
			if p := osb.IDProblem(v); p != "" {
				return errBadRequest("%s: %s", name, p)
			}
			decoded[i] = v
		}
		c.SetParamValues(decoded...)
		for name, values := range c.QueryParams() {
			for _, v := range append([]string{name}, values...) {
				if err := pgtext.Check(name, v); err != nil {
					return errBadRequest("%v", err)
				}
			}
			if idQuery[name] {
				for _, v := range values {
					if len(v) > osb.MaxIDLength {
						return errBadRequest("query parameter %s: %s", name, osb.IDProblem(v))
					}
				}
			}
		}
		return next(c)
	}
}

// idQuery are the query parameters that carry ids.
var idQuery = map[string]bool{"service_id": true, "plan_id": true, "operation": true}

// checkIDs refuses the ids of a request body (service_id, plan_id,
// predecessor_binding_id, ...) that are longer than osb.MaxIDLength, with
// a 400 naming the field; absent ones are left to the handler.
func checkIDs(fields map[string]string) error {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if v := fields[name]; len(v) > osb.MaxIDLength {
			return errBadRequest("%s: %s", name, osb.IDProblem(v))
		}
	}
	return nil
}
