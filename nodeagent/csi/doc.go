// Package csi is csi.bindery.dev, the node agent's CSI node driver: it
// mounts a servicecatalog.k8s.io ServiceBinding's credentials into a Pod
// as files, in the servicebinding.io layout (`type`, `provider`, one file
// per credential key, the binding's secretTransforms applied), with no
// Kubernetes Secret anywhere.
//
// Volumes are inline in Pods (ephemeral); the driver serves the CSI
// Identity and Node services on a unix socket and registers with the
// kubelet through its plugin watcher. For each volume the kubelet hands
// the driver the Pod's service-account token of Bindery's audience (the
// CSIDriver's tokenRequests), and the driver reads the binding's
// credentials subresource from Bindery's aggregated API server with it:
// that server reviews the token and asks RBAC, so the Pod's own identity
// decides, and the agent holds no power to read credentials of its own.
//
// The files live on a tmpfs the driver mounts at the target path (never on
// the node's disk) and unmounts on NodeUnpublishVolume. New credentials (a
// rotation) are swapped in as the kubelet's AtomicWriter swaps a Secret
// volume's: a timestamped directory and the `..data` symlink renamed over
// the old one. The kubelet republishes every Pod sync (requiresRepublish);
// the driver also reads every volume again each refresh interval.
package csi
