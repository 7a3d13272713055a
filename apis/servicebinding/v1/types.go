package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceBinding projects the binding Secret of a service into workloads:
// a volume mounted at $SERVICE_BINDING_ROOT/<name> in the bound containers,
// and optionally environment variables taken from the Secret's entries.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=servicebinding
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServiceBindingSpec   `json:"spec,omitempty"`
	Status ServiceBindingStatus `json:"status,omitempty"`
}

// ServiceBindingSpec is what a ServiceBinding asks for.
type ServiceBindingSpec struct {
	// Name is the binding's directory under $SERVICE_BINDING_ROOT; the
	// ServiceBinding's own name when empty. "." and ".." are refused: they
	// would mount the Secret over the root or the directory above it.
	// +optional
	// +kubebuilder:validation:Pattern=`^([a-z0-9\-][a-z0-9\-\.]{0,252}|\.[a-z0-9\-][a-z0-9\-\.]{0,251}|\.\.[a-z0-9\-\.]{1,251})$`
	Name string `json:"name,omitempty"`
	// Type overrides the Secret's type entry in the projection.
	// +optional
	Type string `json:"type,omitempty"`
	// Provider overrides the Secret's provider entry in the projection.
	// +optional
	Provider string `json:"provider,omitempty"`
	// Workload names the resources the binding is projected into.
	Workload ServiceBindingWorkloadReference `json:"workload"`
	// Service names the Provisioned Service (any resource whose
	// status.binding.name names a Secret) or, as apiVersion v1 and kind
	// Secret, the Secret itself (a Direct Secret Reference).
	Service ServiceBindingServiceReference `json:"service"`
	// Env sets environment variables from the Secret's entries.
	// +optional
	Env []EnvMapping `json:"env,omitempty"`
}

// ServiceBindingWorkloadReference selects workloads by name or by labels,
// never both. Its apiVersion and kind cannot change, as in the
// specification's reference implementation: the workloads a binding is
// projected into are found among those of its kind, so a binding
// re-pointed to another kind would leave the first ones projected.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="exactly one of name and selector must be set"
// +kubebuilder:validation:XValidation:rule="self.apiVersion == oldSelf.apiVersion && self.kind == oldSelf.kind",message="apiVersion and kind are immutable: delete the ServiceBinding and create it anew to bind another kind of workload"
type ServiceBindingWorkloadReference struct {
	// APIVersion of the workload, such as apps/v1.
	APIVersion string `json:"apiVersion"`
	// Kind of the workload, such as Deployment.
	Kind string `json:"kind"`
	// Name of one workload; excludes Selector.
	// +optional
	Name string `json:"name,omitempty"`
	// Selector matches workloads by label; excludes Name.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Containers limits the binding to the containers of these names; all
	// containers when empty.
	// +optional
	Containers []string `json:"containers,omitempty"`
}

// ServiceBindingServiceReference names the service in the binding's namespace.
type ServiceBindingServiceReference struct {
	// APIVersion of the service resource.
	APIVersion string `json:"apiVersion"`
	// Kind of the service resource.
	Kind string `json:"kind"`
	// Name of the service resource.
	Name string `json:"name"`
}

// ServiceBindingSecretReference names the Secret that was projected.
type ServiceBindingSecretReference struct {
	// Name of the Secret.
	Name string `json:"name"`
}

// EnvMapping sets the environment variable Name to the Secret's entry Key.
type EnvMapping struct {
	// Name of the environment variable.
	Name string `json:"name"`
	// Key of the Secret entry.
	Key string `json:"key"`
}

// Condition types and reasons a ServiceBinding's status uses.
const (
	// ConditionReady is True once every selected workload carries the projection.
	ConditionReady = "Ready"
	// ConditionServiceAvailable is True once the service exposes a Secret.
	ConditionServiceAvailable = "ServiceAvailable"
)

// ServiceBindingStatus is what the controller observed.
type ServiceBindingStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions hold Ready and ServiceAvailable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Binding is the Secret projected into the workloads.
	// +optional
	Binding *ServiceBindingSecretReference `json:"binding,omitempty"`
}

// ServiceBindingList is a list of ServiceBindings.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ServiceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ServiceBinding `json:"items"`
}

// ClusterWorkloadResourceMapping tells where a workload kind keeps the parts
// of a Pod template; its name is <plural>.<group> of that kind.
//
// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=servicebinding
// +kubebuilder:storageversion
type ClusterWorkloadResourceMapping struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterWorkloadResourceMappingSpec `json:"spec,omitempty"`
}

// ClusterWorkloadResourceMappingSpec holds one template per version of the kind.
type ClusterWorkloadResourceMappingSpec struct {
	// Versions maps versions of the kind; "*" matches any other version.
	// +optional
	Versions []ClusterWorkloadResourceMappingTemplate `json:"versions,omitempty"`
}

// ClusterWorkloadResourceMappingTemplate locates the Pod template's parts in
// one version of the kind. Empty fields take the PodSpec-able defaults.
type ClusterWorkloadResourceMappingTemplate struct {
	// Version of the kind, or "*".
	Version string `json:"version"`
	// Annotations is a fixed JSONPath to the Pod template's annotations.
	// +optional
	Annotations string `json:"annotations,omitempty"`
	// Containers locate container-like objects.
	// +optional
	Containers []ClusterWorkloadResourceMappingContainer `json:"containers,omitempty"`
	// Volumes is a fixed JSONPath to the Pod template's volumes.
	// +optional
	Volumes string `json:"volumes,omitempty"`
}

// ClusterWorkloadResourceMappingContainer locates container-like objects and
// their parts.
type ClusterWorkloadResourceMappingContainer struct {
	// Path is a JSONPath to the containers, such as .spec.template.spec.containers[*].
	Path string `json:"path"`
	// Name is a fixed JSONPath, relative to a container, to its name.
	// +optional
	Name string `json:"name,omitempty"`
	// Env is a fixed JSONPath, relative to a container, to its env (default .env).
	// +optional
	Env string `json:"env,omitempty"`
	// VolumeMounts is a fixed JSONPath, relative to a container, to its
	// volume mounts (default .volumeMounts).
	// +optional
	VolumeMounts string `json:"volumeMounts,omitempty"`
}

// ClusterWorkloadResourceMappingList is a list of ClusterWorkloadResourceMappings.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ClusterWorkloadResourceMappingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterWorkloadResourceMapping `json:"items"`
}
