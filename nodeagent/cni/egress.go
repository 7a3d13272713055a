package cni

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// EgressAnnotation is the Pod annotation that lists the endpoints a Pod is
// granted: a JSON array of OSB endpoint objects, written by the
// servicebinding webhook for every binding projected into the Pod.
const EgressAnnotation = "bindery.dev/egress"

// Endpoint is one OSB endpoint (OSB 2.17, "Endpoint Object"): a host, the
// ports on it and a protocol.
type Endpoint struct {
	Host     string   `json:"host"`
	Ports    []string `json:"ports"`
	Protocol string   `json:"protocol,omitempty"`
}

// Protocols an endpoint may name; OSB's default is tcp.
const (
	ProtocolTCP = "tcp"
	ProtocolUDP = "udp"
	ProtocolAll = "all"
)

// PortRange is an inclusive range of ports; a single port has First == Last.
type PortRange struct {
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// ParseEgress decodes the value of the egress annotation. It refuses the
// whole value on any bad endpoint, naming it: a Pod's grants are all or
// nothing, never a silently shortened list. An empty value grants nothing.
func ParseEgress(value string) ([]Endpoint, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var eps []Endpoint
	if err := json.Unmarshal([]byte(value), &eps); err != nil {
		return nil, fmt.Errorf("annotation %s: decode: %w", EgressAnnotation, err)
	}
	for i := range eps {
		ep := &eps[i]
		if ep.Protocol == "" {
			ep.Protocol = ProtocolTCP
		}
		if err := ep.validate(); err != nil {
			return nil, fmt.Errorf("annotation %s: [%d]: %w", EgressAnnotation, i, err)
		}
	}
	return eps, nil
}

func (ep Endpoint) validate() error {
	if ep.Host == "" {
		return fmt.Errorf("host: must not be empty")
	}
	switch ep.Protocol {
	case ProtocolTCP, ProtocolUDP, ProtocolAll:
	default:
		return fmt.Errorf("protocol: %q is not one of tcp, udp, all", ep.Protocol)
	}
	if _, err := parsePorts(ep.Ports); err != nil {
		return err
	}
	return nil
}

// parsePorts parses ports as OSB writes them: "5432" or "6000-6010".
func parsePorts(ports []string) ([]PortRange, error) {
	out := make([]PortRange, 0, len(ports))
	for i, p := range ports {
		first, last, isRange := strings.Cut(p, "-")
		lo, err := parsePort(first)
		if err != nil {
			return nil, fmt.Errorf("ports[%d]: %w", i, err)
		}
		hi := lo
		if isRange {
			if hi, err = parsePort(last); err != nil {
				return nil, fmt.Errorf("ports[%d]: %w", i, err)
			}
			if hi < lo {
				return nil, fmt.Errorf("ports[%d]: range %q ends before it starts", i, p)
			}
		}
		out = append(out, PortRange{First: lo, Last: hi})
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a port (1-65535)", s)
	}
	return uint16(n), nil
}
