// Package deviceplugin is the node agent's kubelet device plugin: it
// advertises node devices (device nodes found by path globs, or a fixed
// number of shared slots) as extended resources, following the kubelet
// device plugin API v1beta1
// (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/).
//
// Each configured resource gets its own gRPC server on a unix socket in the
// kubelet's device-plugin directory, registered on kubelet.sock once it
// answers. Device health follows the file system (fsnotify): a node that
// disappears or loses its read permission is reported Unhealthy at once and
// Healthy when it comes back. When the kubelet restarts it deletes every
// socket in the directory and creates kubelet.sock again; the plugins serve
// their sockets again and re-register within a second.
package deviceplugin
