//go:build tools

// Package tools pins the reference CNI plugins that the CNI tests chain
// bindery-cni after: bridge and host-local from containernetworking/plugins.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
)
