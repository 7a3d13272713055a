package cni

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseEgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   string
		want    []Endpoint
		wantErr string
	}{
		{name: "empty", value: "", want: nil},
		{name: "empty array", value: "[]", want: []Endpoint{}},
		{
			name:  "issue example",
			value: `[{"host":"db.example","ports":["5432","6000-6010"],"protocol":"tcp"}]`,
			want:  []Endpoint{{Host: "db.example", Ports: []string{"5432", "6000-6010"}, Protocol: "tcp"}},
		},
		{
			name:  "protocol defaults to tcp",
			value: `[{"host":"198.18.0.2","ports":["1"]}]`,
			want:  []Endpoint{{Host: "198.18.0.2", Ports: []string{"1"}, Protocol: "tcp"}},
		},
		{
			name:  "udp and all",
			value: `[{"host":"a","ports":["53"],"protocol":"udp"},{"host":"b","ports":[],"protocol":"all"}]`,
			want:  []Endpoint{{Host: "a", Ports: []string{"53"}, Protocol: "udp"}, {Host: "b", Ports: []string{}, Protocol: "all"}},
		},
		{name: "not json", value: `db:5432`, wantErr: "decode"},
		{name: "object, not array", value: `{"host":"a"}`, wantErr: "decode"},
		{name: "no host", value: `[{"ports":["1"]}]`, wantErr: "[0]: host: must not be empty"},
		{name: "bad protocol", value: `[{"host":"a","ports":["1"]},{"host":"b","ports":["1"],"protocol":"sctp"}]`, wantErr: `[1]: protocol: "sctp"`},
		{name: "port zero", value: `[{"host":"a","ports":["0"]}]`, wantErr: `ports[0]: "0" is not a port`},
		{name: "port too big", value: `[{"host":"a","ports":["65536"]}]`, wantErr: `ports[0]: "65536"`},
		{name: "backwards range", value: `[{"host":"a","ports":["22","10-5"]}]`, wantErr: `ports[1]: range "10-5" ends before it starts`},
		{name: "half range", value: `[{"host":"a","ports":["10-"]}]`, wantErr: `ports[0]: "" is not a port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseEgress(tt.value)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), EgressAnnotation) {
					t.Errorf("error %v does not name the annotation", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestParsePorts(t *testing.T) {
	t.Parallel()
	got, err := parsePorts([]string{"5432", "6000-6010", "1-65535", " 80 "})
	if err != nil {
		t.Fatal(err)
	}
	want := []PortRange{{5432, 5432}, {6000, 6010}, {1, 65535}, {80, 80}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// FuzzParseEgress feeds the decoder what a Pod's author could write: it must
// never panic, and what it accepts must make rules.
func FuzzParseEgress(f *testing.F) {
	f.Add(`[{"host":"db.example","ports":["5432","6000-6010"],"protocol":"tcp"}]`)
	f.Add(`[{"host":"198.18.0.1","ports":[],"protocol":"all"}]`)
	f.Add(`[{"host":"::1","ports":["1-2"],"protocol":"udp"}]`)
	f.Fuzz(func(t *testing.T, value string) {
		eps, err := ParseEgress(value)
		if err != nil {
			return
		}
		for _, ep := range eps {
			if _, err := parsePorts(ep.Ports); err != nil {
				t.Fatalf("accepted endpoint with bad ports: %v", err)
			}
		}
	})
}
