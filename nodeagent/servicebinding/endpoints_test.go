package servicebinding

import (
	"reflect"
	"strings"
	"testing"
)

// TestEndpointsFrom converts status.endpoints as the cache holds it, and
// names the element and field of what cannot be converted.
func TestEndpointsFrom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     any
		want    []Endpoint
		wantErr string
	}{
		{name: "host, ports and protocol",
			raw:  []any{map[string]any{"host": "10.0.0.5", "ports": []any{"5432", "6000-6010"}, "protocol": "tcp"}},
			want: []Endpoint{{Host: "10.0.0.5", Ports: []string{"5432", "6000-6010"}, Protocol: "tcp"}}},
		{name: "no protocol and no ports",
			raw:  []any{map[string]any{"host": "db.example"}, map[string]any{"host": "b", "ports": nil, "protocol": nil}},
			want: []Endpoint{{Host: "db.example"}, {Host: "b"}}},
		{name: "empty", raw: []any{}, want: []Endpoint{}},
		{name: "not an array", raw: map[string]any{}, wantErr: ": map[string]interface {}, want an array"},
		{name: "an element that is no object", raw: []any{"x"}, wantErr: "[0]: string, want an object"},
		{name: "a host that is no string", raw: []any{map[string]any{"host": int64(1)}}, wantErr: "[0].host: int64, want a string"},
		{name: "a port that is no string", raw: []any{map[string]any{"host": "h", "ports": []any{int64(5432)}}}, wantErr: "[0].ports[0]: int64, want a string"},
		{name: "ports that are no array", raw: []any{map[string]any{"host": "h", "ports": "5432"}}, wantErr: "[0].ports: string, want an array"},
		{name: "a protocol that is no string", raw: []any{map[string]any{"host": "h", "protocol": true}}, wantErr: "[0].protocol: bool, want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := endpointsFrom(tt.raw)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
}
