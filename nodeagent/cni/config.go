package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// PodAnnotationsCapability is the runtimeConfig capability through which a
// container runtime passes a Pod's annotations to the plugins that ask.
const PodAnnotationsCapability = "io.kubernetes.cri.pod-annotations"

// PluginType is the plugin's binary name and its "type" in a conflist.
const PluginType = "bindery-cni"

// NetConf is the plugin's configuration, one entry of a conflist's plugins.
type NetConf struct {
	types.PluginConf

	// ManagedCIDRs are the ranges the plugin guards: a Pod reaches
	// addresses in them only where granted. Required.
	ManagedCIDRs []string `json:"managedCIDRs"`
	// Kubeconfig names a kubeconfig file for reading a Pod's annotations
	// from the kube-apiserver when the runtime does not pass them.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// StateDir holds one file per attachment; DefaultStateDir if empty.
	StateDir string `json:"stateDir,omitempty"`

	RuntimeConfig struct {
		// PodAnnotations is nil unless the runtime passed the capability.
		PodAnnotations map[string]string `json:"io.kubernetes.cri.pod-annotations,omitempty"`
	} `json:"runtimeConfig"`

	managed []netip.Prefix
}

// k8sArgs are the CNI_ARGS that the kubelet's runtimes pass.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE types.UnmarshallableString //nolint:revive // the names are CNI_ARGS keys
	K8S_POD_NAME      types.UnmarshallableString //nolint:revive
}

// parseConfig decodes the configuration on stdin and the prevResult in it,
// converted to the configuration's version. Every problem comes back as a
// CNI error with the spec's code, naming the field.
func parseConfig(stdin []byte) (*NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "decode network configuration", err.Error())
	}
	if len(c.ManagedCIDRs) == 0 {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "managedCIDRs: must list at least one range", "")
	}
	for i, s := range c.ManagedCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("managedCIDRs[%d]: %q is not a CIDR", i, s), err.Error())
		}
		c.managed = append(c.managed, p.Masked())
	}
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.PluginConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "decode prevResult", err.Error())
		}
	}
	return &c, nil
}
