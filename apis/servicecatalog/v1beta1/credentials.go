package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceBindingCredentials is what the credentials subresource of a
// ServiceBinding (GET .../servicebindings/NAME/credentials) returns: the
// binding's credentials as its Secret would hold them, for consumers that
// read them without a Secret (the CSI driver csi.bindery.dev, as the Pod's
// own service account). A Bindery extension to v1beta1: RBAC grants it
// apart from the binding itself (the resource servicebindings/credentials).
type ServiceBindingCredentials struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata: the binding's name, namespace, uid and
	// resourceVersion.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Data holds one entry per credential key, after the binding's
	// secretTransforms, with the servicebinding.io entries `type` and
	// `provider`: the keys and values of the binding's Secret, and the
	// files of a servicebinding.io binding directory.
	// +optional
	Data map[string][]byte `json:"data,omitempty"`

	// Successor names the newest binding, Ready and not being deleted,
	// whose spec.predecessorBindingRef names this one (OSB 2.17
	// rotation): a consumer that follows rotations reads its credentials
	// next, with its own permission to. Empty when there is none.
	// +optional
	Successor string `json:"successor,omitempty"`
}
