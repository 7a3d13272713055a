// Package nodeagent is Bindery's agent on every node: it covers the
// kubelet's extension points: device plugins (package deviceplugin) and the
// chained CNI plugin bindery-cni with its installer (package cni). This
// package holds the agent's configuration file.
package nodeagent

import (
	"fmt"
	"os"

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
	if err := c.Validate(); err != nil {
		return nil, err
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

// Validate returns every problem in the configuration at once, each a
// *deviceplugin.FieldError naming its field path; nil when all is well.
func (c *Config) Validate() error {
	return deviceplugin.Validate(c.DevicePlugins, "devicePlugins")
}
