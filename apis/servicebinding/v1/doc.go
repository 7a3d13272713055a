// Package v1 is servicebinding.io/v1, the API of the Service Binding
// Specification for Kubernetes 1.1.0 (github.com/servicebinding/spec):
// ServiceBinding, which projects a Provisioned Service's Secret into a
// workload, and ClusterWorkloadResourceMapping, which says where a workload
// kind keeps its Pod template. It is the stored version; v1beta1 (spec 1.0.0)
// is served beside it with the same schema.
//
// The resources are CustomResourceDefinitions (deploy/servicebinding/crd),
// generated from these types by controller-gen.
//
// +k8s:deepcopy-gen=package
// +kubebuilder:object:generate=false
// +groupName=servicebinding.io
package v1
