// Package nodeagent is Bindery's agent on every node (`bindery serve
// nodeagent`): it covers the kubelet's extension points: device plugins
// (package deviceplugin), the chained CNI plugin bindery-cni with its
// installer (package cni), and the CSI driver csi.bindery.dev (package
// csi). This package holds the agent's options and configuration file.
//
// Package servicebinding sits beside them because it prepares what the
// node's parts consume (projected volumes, the egress annotation
// bindery-cni reads), but it runs once per cluster, as `bindery serve
// webhook`, not on every node.
package nodeagent

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/nodeagent/deviceplugin"
)

// Config is the node agent's YAML configuration file.
type Config struct {
	// DevicePlugins lists the resources to advertise to the kubelet, one
	// device plugin each.
	DevicePlugins []deviceplugin.Config `json:"devicePlugins,omitempty"`
}

// ParseConfig decodes a YAML configuration, refusing unknown fields, and
// validates it.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("decode node agent configuration: %w", err)
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return &c, nil
}

// LoadConfig reads and validates the configuration file at path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read node agent configuration: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate returns every problem in the configuration at once, each naming
// its field path as the Kubernetes API does; empty when all is well.
func (c *Config) Validate() field.ErrorList {
	return deviceplugin.Validate(c.DevicePlugins, field.NewPath("devicePlugins"))
}
