package postgresql_test

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/broker/postgresql"
)

func TestParsePlanConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    postgresql.PlanConfig
		wantErr []string // each must appear in the error
	}{
		{in: ``, wantErr: []string{"connection_limit: required (a database without a limit could take every connection"}},
		{in: `null`, wantErr: []string{"connection_limit: required"}},
		{in: `{}`, wantErr: []string{"connection_limit: required"}},
		{in: `{"connection_limit": 1}`, want: postgresql.PlanConfig{ConnectionLimit: 1}},
		{
			in:   `{"connection_limit": 20, "statement_timeout": "30s", "extensions": ["pgcrypto"]}`,
			want: postgresql.PlanConfig{ConnectionLimit: 20, StatementTimeout: 30 * time.Second, Extensions: []string{"pgcrypto"}},
		},
		{in: `{"connection_limit": 5, "statement_timeout": "1m30.5s"}`, want: postgresql.PlanConfig{ConnectionLimit: 5, StatementTimeout: 90500 * time.Millisecond}},
		{in: `{"connection_limit": 5, "statement_timeout": "0s"}`, want: postgresql.PlanConfig{ConnectionLimit: 5}},
		{in: `{"conection_limit": 20}`, wantErr: []string{`"conection_limit": unknown field`, "connection_limit: required"}},
		{in: `{"b": 1, "a": 2}`, wantErr: []string{`"a": unknown field; "b": unknown field`}},
		{in: `{"connection_limit": -1}`, wantErr: []string{"connection_limit: must be a whole number of at least 1 (a database without a limit"}},
		{in: `{"connection_limit": 0}`, wantErr: []string{"connection_limit: must be a whole number of at least 1"}},
		{in: `{"connection_limit": 2.5}`, wantErr: []string{"connection_limit: must be a whole number"}},
		{in: `{"connection_limit": "20"}`, wantErr: []string{"connection_limit: must be a whole number"}},
		{in: `{"connection_limit": 2147483648}`, wantErr: []string{"connection_limit: must be a whole number"}},
		{in: `{"statement_timeout": 30}`, wantErr: []string{`statement_timeout: must be a duration string such as "30s"`}},
		{in: `{"statement_timeout": "30"}`, wantErr: []string{`statement_timeout: must be a duration string such as "30s": "30" is not one`}},
		{in: `{"statement_timeout": "-1s"}`, wantErr: []string{"statement_timeout: must not be negative"}},
		{in: `{"statement_timeout": "1.5ms"}`, wantErr: []string{"statement_timeout: must be a whole number of milliseconds"}},
		{in: `{"statement_timeout": "1000h"}`, wantErr: []string{"statement_timeout: must be at most"}},
		{in: `{"extensions": "pgcrypto"}`, wantErr: []string{"extensions: must be an array of extension names"}},
		{in: `{"extensions": ["a", "", "a", "` + strings.Repeat("x", 64) + `"]}`, wantErr: []string{
			"extensions[1]: must not be empty", `extensions[2]: "a" is listed twice`, "extensions[3]: must be at most 63 bytes long",
		}},
		{in: `[1]`, wantErr: []string{"plan config: must be a JSON object"}},
		{in: `{"connection_limit": 0, "statement_timeout": "x", "other": true}`, wantErr: []string{
			`"other": unknown field`, "connection_limit:", "statement_timeout:",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := postgresql.ParsePlanConfig(json.RawMessage(tt.in))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestWithParameters(t *testing.T) {
	t.Parallel()
	plan := postgresql.PlanConfig{ConnectionLimit: 20, StatementTimeout: 30 * time.Second, Extensions: []string{"pgcrypto"}}
	tests := []struct {
		name    string
		params  map[string]any
		want    time.Duration
		wantErr bool
	}{
		{"none", nil, 30 * time.Second, false},
		{"other parameters", map[string]any{"size": "big"}, 30 * time.Second, false},
		{"float from JSON", map[string]any{"statement_timeout_ms": float64(1500)}, 1500 * time.Millisecond, false},
		{"int", map[string]any{"statement_timeout_ms": 250}, 250 * time.Millisecond, false},
		{"json.Number", map[string]any{"statement_timeout_ms": json.Number("42")}, 42 * time.Millisecond, false},
		// JSON Schema's integers: the plan's schema admits them.
		{"json.Number with an exponent", map[string]any{"statement_timeout_ms": json.Number("1e2")}, 100 * time.Millisecond, false},
		{"json.Number with a zero fraction", map[string]any{"statement_timeout_ms": json.Number("250.0")}, 250 * time.Millisecond, false},
		{"json.Number with a fraction", map[string]any{"statement_timeout_ms": json.Number("2.5")}, 0, true},
		{"json.Number out of range", map[string]any{"statement_timeout_ms": json.Number("1e400")}, 0, true},
		{"zero means the cluster default", map[string]any{"statement_timeout_ms": 0}, 0, false},
		{"fraction", map[string]any{"statement_timeout_ms": 1.5}, 0, true},
		{"negative", map[string]any{"statement_timeout_ms": -1}, 0, true},
		{"too large", map[string]any{"statement_timeout_ms": int64(math.MaxInt32) + 1}, 0, true},
		{"string", map[string]any{"statement_timeout_ms": "1000"}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plan.WithParameters(tt.params)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "statement_timeout_ms") {
					t.Fatalf("got %v, %v; want an error naming statement_timeout_ms", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.StatementTimeout != tt.want || got.ConnectionLimit != 20 || len(got.Extensions) != 1 {
				t.Errorf("got %+v, want timeout %v and the plan's other settings", got, tt.want)
			}
		})
	}
}

func FuzzParsePlanConfig(f *testing.F) {
	for _, seed := range []string{``, `{}`, `{"connection_limit": 20, "statement_timeout": "30s", "extensions": ["pgcrypto"]}`, `{"extensions": [""]}`, `[`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		cfg, err := postgresql.ParsePlanConfig(in)
		if err != nil {
			return
		}
		// Whatever is accepted must make statements PostgreSQL can take.
		if cfg.ConnectionLimit < 1 || cfg.StatementTimeout < 0 || cfg.StatementTimeout%time.Millisecond != 0 {
			t.Fatalf("accepted %+v", cfg)
		}
		for _, e := range cfg.Extensions {
			if e == "" || len(e) > 63 || strings.ContainsRune(e, 0) {
				t.Fatalf("accepted extension %q", e)
			}
		}
	})
}
