package postgresql

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PlanConfig is what a plan's `config` object in the catalogue asks of
// every database of the plan.
type PlanConfig struct {
	// ConnectionLimit caps the database's concurrent connections, and
	// each binding role's anywhere on the cluster. It is required: the
	// plans' limits together are what the cluster promises its tenants,
	// and provisioning refuses a plan whose limit the cluster cannot
	// hold besides the others'.
	ConnectionLimit int
	// StatementTimeout aborts statements that run longer. 0 (the default)
	// leaves the cluster's own setting, normally no timeout. It is a whole
	// number of milliseconds, as PostgreSQL keeps it.
	StatementTimeout time.Duration
	// Extensions are created in the database (CREATE EXTENSION IF NOT
	// EXISTS, in this order). Updates add new ones and never drop any.
	Extensions []string
}

// StatementTimeoutParameter is the instance parameter that overrides the
// plan's statement timeout, in milliseconds.
const StatementTimeoutParameter = "statement_timeout_ms"

// maxTimeout is the largest statement_timeout PostgreSQL accepts (an int
// of milliseconds).
const maxTimeout = math.MaxInt32 * time.Millisecond

// limitReason says why connection_limit is required.
const limitReason = " (a database without a limit could take every connection of the cluster)"

// maxIdentifier is PostgreSQL's NAMEDATALEN-1.
const maxIdentifier = 63

// ParsePlanConfig decodes and checks a plan's config object. Unknown
// fields are errors, connection_limit is required, and every
// problem is reported at once, each with the name of its field, so that the
// broker can refuse a bad catalogue when it starts.
func ParsePlanConfig(raw json.RawMessage) (PlanConfig, error) {
	var cfg PlanConfig
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return PlanConfig{}, errors.New("plan config: connection_limit: required" + limitReason)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return PlanConfig{}, fmt.Errorf("plan config: must be a JSON object: %w", err)
	}
	var problems []string
	add := func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}
	var unknown []string
	for name := range fields {
		switch name {
		case "connection_limit", "statement_timeout", "extensions":
		default:
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		add(strconv.Quote(name), "unknown field")
	}
	if v, ok := fields["connection_limit"]; !ok {
		add("connection_limit", "required%s", limitReason)
	} else {
		var n int
		if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > math.MaxInt32 {
			add("connection_limit", "must be a whole number of at least 1%s", limitReason)
		} else {
			cfg.ConnectionLimit = n
		}
	}
	if v, ok := fields["statement_timeout"]; ok {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			add("statement_timeout", `must be a duration string such as "30s"`)
		} else if d, err := time.ParseDuration(s); err != nil {
			add("statement_timeout", `must be a duration string such as "30s": %q is not one`, s)
		} else if msg := checkTimeout(d); msg != "" {
			add("statement_timeout", "%s", msg)
		} else {
			cfg.StatementTimeout = d
		}
	}
	if v, ok := fields["extensions"]; ok {
		var exts []string
		if err := json.Unmarshal(v, &exts); err != nil {
			add("extensions", "must be an array of extension names")
		} else {
			for i, e := range exts {
				field := fmt.Sprintf("extensions[%d]", i)
				switch {
				case e == "":
					add(field, "must not be empty")
				case strings.ContainsRune(e, 0):
					add(field, "must not contain a NUL character")
				case len(e) > maxIdentifier:
					add(field, "must be at most %d bytes long", maxIdentifier)
				case slices.Contains(exts[:i], e):
					add(field, "%q is listed twice", e)
				}
			}
			cfg.Extensions = exts
		}
	}
	if len(problems) > 0 {
		return PlanConfig{}, errors.New("plan config: " + strings.Join(problems, "; "))
	}
	return cfg, nil
}

func checkTimeout(d time.Duration) string {
	switch {
	case d < 0:
		return "must not be negative"
	case d > maxTimeout:
		return fmt.Sprintf("must be at most %s", maxTimeout)
	case d%time.Millisecond != 0:
		return "must be a whole number of milliseconds"
	}
	return ""
}

// WithParameters applies an instance's parameters to the plan's settings:
// statement_timeout_ms, when present, replaces the plan's statement
// timeout. Other parameters are not the driver's concern and are ignored.
func (c PlanConfig) WithParameters(params map[string]any) (PlanConfig, error) {
	v, ok := params[StatementTimeoutParameter]
	if !ok || v == nil {
		return c, nil
	}
	ms, ok := integer(v)
	if !ok || ms < 0 || ms > math.MaxInt32 {
		return PlanConfig{}, fmt.Errorf("parameter %s: must be an integer from 0 to %d", StatementTimeoutParameter, math.MaxInt32)
	}
	c.StatementTimeout = time.Duration(ms) * time.Millisecond
	c.Extensions = slices.Clone(c.Extensions)
	return c, nil
}

// integer accepts the shapes a JSON integer takes after decoding.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint32:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		// An integer written with an exponent or a zero fraction (1e2,
		// 100.0), as JSON Schema counts integers.
		f, err := n.Float64()
		if err != nil {
			return 0, false
		}
		return integer(f)
	}
	return 0, false
}
