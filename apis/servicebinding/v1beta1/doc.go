// Package v1beta1 is servicebinding.io/v1beta1, the API of the Service
// Binding Specification 1.0.0. It is served, deprecated, beside v1 with the
// same schema (the CRDs convert between them with strategy None), so
// manifests written for 1.0.0 keep working; v1 is stored. The types are those
// of package v1 under another version.
//
// +k8s:deepcopy-gen=package
// +kubebuilder:object:generate=false
// +groupName=servicebinding.io
package v1beta1
