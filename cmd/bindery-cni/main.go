// Command bindery-cni is Bindery's chained CNI plugin: inside the
// managed-services address ranges, a Pod reaches only the endpoints of the
// bindings projected into it. See package nodeagent/cni.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/bindery-dev/bindery/nodeagent/cni"
)

func main() {
	skel.PluginMainFuncs(cni.Funcs(), cni.SupportedVersions, cni.About())
}
