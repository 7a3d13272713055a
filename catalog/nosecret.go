package catalog

// NoSecretAnnotation on a binding (value "true") says its credentials
// reach workloads without a Kubernetes Secret: the engine writes none
// (and removes one it wrote before), status.binding stays empty so no
// servicebinding.io implementation projects it, and Pods mount the
// credentials with the CSI driver csi.bindery.dev, which reads them from
// the Kubernetes API's credentials subresource as the Pod's own service
// account. Service Catalog's tools ignore annotations, so manifests that
// carry it still work with them.
const NoSecretAnnotation = "bindery.dev/no-secret"

// NoSecret reports whether the object asks for no Secret
// (NoSecretAnnotation).
func NoSecret(m *Meta) bool { return m.Annotations[NoSecretAnnotation] == "true" }
