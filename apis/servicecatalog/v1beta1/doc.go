// Package v1beta1 is the servicecatalog.k8s.io/v1beta1 API that Bindery serves
// through the Kubernetes aggregation layer: ClusterServiceBroker,
// ClusterServiceClass, ClusterServicePlan, their namespaced twins
// ServiceBroker, ServiceClass and ServicePlan, ServiceInstance and
// ServiceBinding.
//
// The JSON of every kind is that of Kubernetes Service Catalog's v1beta1
// (kubernetes-sigs/service-catalog), so manifests and tools written for it keep
// working, plus the fields Bindery's catalog adds for OSB 2.15–2.17. Spec and
// status use the field names and omission rules of the catalog's own model
// (package catalog), so that one converts to the other field by field; the
// few differences are listed in apis/servicecatalog/README.md.
//
// The server uses these types as its internal version too (see
// AddToSchemeAsInternal): there is one version, so there is no conversion
// code to maintain.
//
// +k8s:deepcopy-gen=package
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.k8s.servicecatalog.v1beta1
// +groupName=servicecatalog.k8s.io
package v1beta1
