// Package cni is bindery-cni, a chained CNI plugin that makes a Pod's
// bindings its network grants: inside the managed-services address ranges
// (managedCIDRs) a Pod can open connections only to the endpoints of the
// bindings projected into it, which the servicebinding webhook lists in the
// Pod annotation bindery.dev/egress. Traffic to any other address is left
// alone.
//
// The rules are one nftables table of the plugin's own (inet bindery) in the
// Pod's network namespace, hooked on output: established and related traffic
// is accepted, new traffic to a granted address, protocol and port is
// accepted, and everything else into managedCIDRs is dropped. What ADD did is
// recorded in a state directory, one file per attachment, so that CHECK can
// verify it and GC can find attachments the runtime forgot.
//
// The rules live in the Pod's own network namespace, so a container with
// CAP_NET_ADMIN could remove them; Pods that must not bypass them must run
// without it (the restricted Pod Security level drops it).
//
// The package also installs the plugin on a node (Install, Uninstall): it
// copies the binary into the CNI bin directory and chains the plugin after
// the cluster's network plugin in the existing conflist.
package cni
