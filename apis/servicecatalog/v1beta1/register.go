package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of Service Catalog.
const GroupName = "servicecatalog.k8s.io"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// InternalGroupVersion is the group's internal version, which the API server
// maps to the same Go types (see AddToSchemeAsInternal).
var InternalGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

// Kind returns the group-qualified kind.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource returns the group-qualified resource; the generated listers use it
// in their NotFound errors.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the types of servicecatalog.k8s.io/v1beta1,
	// their defaults and the fields that field selectors may name.
	SchemeBuilder      = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs, addFieldLabelConversionFuncs)
	localSchemeBuilder = &SchemeBuilder

	// AddToScheme adds servicecatalog.k8s.io/v1beta1 to a scheme: what a
	// client (or the server's wire format) needs.
	AddToScheme = localSchemeBuilder.AddToScheme
)

// knownTypes are the kinds of the group, objects and lists.
func knownTypes() []runtime.Object {
	return []runtime.Object{
		&ClusterServiceBroker{}, &ClusterServiceBrokerList{},
		&ClusterServiceClass{}, &ClusterServiceClassList{},
		&ClusterServicePlan{}, &ClusterServicePlanList{},
		&ServiceBroker{}, &ServiceBrokerList{},
		&ServiceClass{}, &ServiceClassList{},
		&ServicePlan{}, &ServicePlanList{},
		&ServiceInstance{}, &ServiceInstanceList{},
		&ServiceBinding{}, &ServiceBindingList{},
		&ServiceBindingCredentials{},
	}
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, knownTypes()...)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// AddToSchemeAsInternal registers the same Go types as the group's internal
// version (runtime.APIVersionInternal), which k8s.io/apiserver requires.
//
// Bindery serves a single version of this group, so a separate internal
// package would be a copy of this one plus conversion code to keep in step
// with it for no gain. With the types registered under both versions the
// scheme "converts" between them by copying and setting the kind, and
// objects decoded for the storage are these very types. Should a second
// version ever be served, that is the time to add a real internal package.
//
// Call AddToScheme first: scheme.ObjectKinds lists a type's versions in the
// order they were registered, and code that takes the first one should see
// v1beta1.
func AddToSchemeAsInternal(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(InternalGroupVersion, knownTypes()...)
	return nil
}
