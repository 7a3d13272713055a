package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Field order and omitempty follow catalog/types.go, so that the JSON of a
// spec or status is the same on both sides (see the package comment).

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterServiceBroker is an Open Service Broker registered with the catalog.
// Its services and plans appear as ClusterServiceClasses and
// ClusterServicePlans.
type ClusterServiceBroker struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says where the broker is and how to talk to it.
	// +optional
	Spec ClusterServiceBrokerSpec `json:"spec,omitempty"`

	// Status reports the last fetch of the broker's catalog.
	// +optional
	Status ClusterServiceBrokerStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterServiceBrokerList is a list of ClusterServiceBrokers.
type ClusterServiceBrokerList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterServiceBrokers.
	Items []ClusterServiceBroker `json:"items"`
}

// ClusterServiceBrokerSpec says where a broker is, how to authenticate to it
// and when to fetch its catalog again.
type ClusterServiceBrokerSpec struct {
	CommonServiceBrokerSpec `json:",inline"`

	// AuthInfo names the Secret whose credentials are presented to the
	// broker.
	// +optional
	AuthInfo *ClusterServiceBrokerAuthInfo `json:"authInfo,omitempty"`
}

// CommonServiceBrokerSpec is what both kinds of broker say of where the
// broker is and when its catalog is fetched again.
type CommonServiceBrokerSpec struct {
	// URL is the base address of the broker's OSB API (without /v2).
	URL string `json:"url"`

	// InsecureSkipTLSVerify turns off verification of the broker's serving
	// certificate. Prefer CABundle.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// CABundle holds the PEM certificates that the broker's serving
	// certificate must chain to. Like every []byte field of a Kubernetes
	// API it is base64 in JSON; the catalog's REST API holds the PEM text.
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`

	// RelistBehavior says when the broker's catalog is fetched again:
	// Duration (every RelistDuration, the default) or Manual (only when the
	// spec changes or RelistRequests is incremented).
	// +optional
	RelistBehavior ServiceBrokerRelistBehavior `json:"relistBehavior"`

	// RelistDuration is the interval between fetches when RelistBehavior is
	// Duration; it defaults to 15m.
	// +optional
	RelistDuration *metav1.Duration `json:"relistDuration,omitempty"`

	// RelistRequests is a counter: incrementing it fetches the catalog now.
	// +optional
	RelistRequests int64 `json:"relistRequests,omitempty"`

	// CatalogRestrictions limit which of the broker's services and plans
	// become its classes and plans.
	// +optional
	CatalogRestrictions *CatalogRestrictions `json:"catalogRestrictions,omitempty"`
}

// ServiceBrokerRelistBehavior says when a broker's catalog is fetched again.
type ServiceBrokerRelistBehavior string

// Relist behaviours.
const (
	// ServiceBrokerRelistBehaviorDuration fetches the catalog every
	// RelistDuration.
	ServiceBrokerRelistBehaviorDuration ServiceBrokerRelistBehavior = "Duration"
	// ServiceBrokerRelistBehaviorManual fetches the catalog only when the
	// spec changes (RelistRequests included).
	ServiceBrokerRelistBehaviorManual ServiceBrokerRelistBehavior = "Manual"
)

// CatalogRestrictions filter a broker's catalog. Each entry is a requirement
// in label-selector syntax (=, ==, !=, in, notin; several joined by commas)
// over these properties:
//
//	classes: name, spec.externalName, spec.externalID
//	plans:   name, spec.externalName, spec.externalID, spec.free,
//	         spec.clusterServiceClass.name
//
// For example serviceClass: ["spec.externalName in (postgresql)"] keeps only
// that service.
type CatalogRestrictions struct {
	// ServiceClass restricts which services become ClusterServiceClasses.
	// +optional
	// +listType=atomic
	ServiceClass []string `json:"serviceClass,omitempty"`
	// ServicePlan restricts which plans become ClusterServicePlans.
	// +optional
	// +listType=atomic
	ServicePlan []string `json:"servicePlan,omitempty"`
}

// ClusterServiceBrokerAuthInfo says how Bindery authenticates to a broker:
// set one of its members.
type ClusterServiceBrokerAuthInfo struct {
	// Basic is HTTP basic authentication.
	// +optional
	Basic *ClusterBasicAuthConfig `json:"basic,omitempty"`
	// Bearer sends a bearer token.
	// +optional
	Bearer *ClusterBearerTokenAuthConfig `json:"bearer,omitempty"`
}

// ClusterBasicAuthConfig is HTTP basic authentication to a broker.
type ClusterBasicAuthConfig struct {
	// Username is the user name presented to the broker. Bindery's REST API
	// shows it for brokers registered there, whose password is sealed in
	// the catalog; through this API, name a Secret in SecretRef instead.
	// +optional
	Username string `json:"username"`

	// SecretRef names a Secret with the keys "username" and "password".
	// +optional
	SecretRef *ObjectReference `json:"secretRef,omitempty"`
}

// ClusterBearerTokenAuthConfig sends a bearer token to a broker.
type ClusterBearerTokenAuthConfig struct {
	// SecretRef names a Secret with the key "token", holding the token
	// without the "Bearer " prefix.
	// +optional
	SecretRef *ObjectReference `json:"secretRef,omitempty"`
}

// Keys of the Secrets that ClusterServiceBrokerAuthInfo names.
const (
	BasicAuthUsernameKey = "username"
	BasicAuthPasswordKey = "password"
	BearerTokenKey       = "token"
)

// ClusterServiceBrokerStatus reports the last fetch of a broker's catalog.
type ClusterServiceBrokerStatus struct {
	// Conditions say whether the catalog was fetched (Ready) and whether
	// Bindery gave up (Failed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []ServiceBrokerCondition `json:"conditions,omitempty"`

	// ReconciledGeneration is the generation of the spec that the last
	// fetch used, whether or not it succeeded.
	// +optional
	ReconciledGeneration int64 `json:"reconciledGeneration,omitempty"`

	// LastCatalogRetrievalTime is when the catalog was last fetched.
	// +optional
	LastCatalogRetrievalTime *metav1.Time `json:"lastCatalogRetrievalTime,omitempty"`

	// NextRelistTime is when the catalog is due to be fetched again.
	// +optional
	NextRelistTime *metav1.Time `json:"nextRelistTime,omitempty"`

	// ServiceClassCount is how many ClusterServiceClasses the broker offers.
	// +optional
	ServiceClassCount int64 `json:"serviceClassCount"`

	// ServicePlanCount is how many ClusterServicePlans the broker offers.
	// +optional
	ServicePlanCount int64 `json:"servicePlanCount"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceBroker is an Open Service Broker registered in one namespace, as a
// team registers its own: its services and plans appear as the
// ServiceClasses and ServicePlans of that namespace, which no other
// namespace sees.
type ServiceBroker struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says where the broker is and how to talk to it.
	// +optional
	Spec ServiceBrokerSpec `json:"spec,omitempty"`

	// Status reports the last fetch of the broker's catalog.
	// +optional
	Status ServiceBrokerStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceBrokerList is a list of ServiceBrokers.
type ServiceBrokerList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServiceBrokers.
	Items []ServiceBroker `json:"items"`
}

// ServiceBrokerSpec is ClusterServiceBrokerSpec for a broker of a
// namespace, whose credentials are in a Secret of that namespace.
type ServiceBrokerSpec struct {
	CommonServiceBrokerSpec `json:",inline"`

	// AuthInfo names the Secret, in the broker's namespace, whose
	// credentials are presented to the broker.
	// +optional
	AuthInfo *ServiceBrokerAuthInfo `json:"authInfo,omitempty"`
}

// ServiceBrokerAuthInfo says how Bindery authenticates to a ServiceBroker:
// set one of its members.
type ServiceBrokerAuthInfo struct {
	// Basic is HTTP basic authentication.
	// +optional
	Basic *BasicAuthConfig `json:"basic,omitempty"`
	// Bearer sends a bearer token.
	// +optional
	Bearer *BearerTokenAuthConfig `json:"bearer,omitempty"`
}

// BasicAuthConfig is HTTP basic authentication to a ServiceBroker.
type BasicAuthConfig struct {
	// Username is the user name presented to the broker, shown for brokers
	// registered through Bindery's REST API, whose password is sealed in
	// the catalog; through this API, name a Secret in SecretRef instead.
	// +optional
	Username string `json:"username"`

	// SecretRef names a Secret of the broker's namespace with the keys
	// "username" and "password".
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// BearerTokenAuthConfig sends a bearer token to a ServiceBroker.
type BearerTokenAuthConfig struct {
	// SecretRef names a Secret of the broker's namespace with the key
	// "token", holding the token without the "Bearer " prefix.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// ServiceBrokerStatus reports the last fetch of a ServiceBroker's catalog,
// as ClusterServiceBrokerStatus does for a ClusterServiceBroker.
type ServiceBrokerStatus struct {
	// Conditions say whether the catalog was fetched (Ready) and whether
	// Bindery gave up (Failed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []ServiceBrokerCondition `json:"conditions,omitempty"`

	// ReconciledGeneration is the generation of the spec that the last
	// fetch used, whether or not it succeeded.
	// +optional
	ReconciledGeneration int64 `json:"reconciledGeneration,omitempty"`

	// LastCatalogRetrievalTime is when the catalog was last fetched.
	// +optional
	LastCatalogRetrievalTime *metav1.Time `json:"lastCatalogRetrievalTime,omitempty"`

	// NextRelistTime is when the catalog is due to be fetched again.
	// +optional
	NextRelistTime *metav1.Time `json:"nextRelistTime,omitempty"`

	// ServiceClassCount is how many ServiceClasses the broker offers.
	// +optional
	ServiceClassCount int64 `json:"serviceClassCount"`

	// ServicePlanCount is how many ServicePlans the broker offers.
	// +optional
	ServicePlanCount int64 `json:"servicePlanCount"`
}

// ServiceBrokerCondition is one aspect of a broker's state.
type ServiceBrokerCondition struct {
	// Type is Ready or Failed.
	Type ServiceBrokerConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// Reason is a CamelCase word saying why.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says why, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// ServiceBrokerConditionType is the type of a ServiceBrokerCondition.
type ServiceBrokerConditionType string

// Broker condition types.
const (
	ServiceBrokerConditionReady  ServiceBrokerConditionType = "Ready"
	ServiceBrokerConditionFailed ServiceBrokerConditionType = "Failed"
)

// ConditionStatus is the status of a condition.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterServiceClass is a service that a broker offers (an OSB service).
// Bindery creates, updates and removes them when it fetches the broker's
// catalog.
type ClusterServiceClass struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the service as the broker describes it.
	// +optional
	Spec ClusterServiceClassSpec `json:"spec,omitempty"`

	// Status says whether the broker still offers the service.
	// +optional
	Status ClusterServiceClassStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterServiceClassList is a list of ClusterServiceClasses.
type ClusterServiceClassList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterServiceClasses.
	Items []ClusterServiceClass `json:"items"`
}

// ClusterServiceClassSpec is an OSB service object.
type ClusterServiceClassSpec struct {
	// ClusterServiceBrokerName is the name of the broker that offers the
	// service.
	ClusterServiceBrokerName string `json:"clusterServiceBrokerName"`

	CommonServiceClassSpec `json:",inline"`
}

// CommonServiceClassSpec is the OSB service object, as both kinds of
// class hold it.
type CommonServiceClassSpec struct {
	// ExternalName is the service's name in the broker's catalog. The broker
	// may change it.
	ExternalName string `json:"externalName"`

	// ExternalID is the service's id in the broker's catalog.
	ExternalID string `json:"externalID"`

	// Description is a short description of the service.
	Description string `json:"description"`

	// Bindable says whether instances of the service can be bound, unless a
	// plan says otherwise.
	Bindable bool `json:"bindable"`

	// BindingRetrievable says whether the broker answers GET on bindings.
	// +optional
	BindingRetrievable bool `json:"bindingRetrievable,omitempty"`

	// InstancesRetrievable says whether the broker answers GET on
	// instances.
	// +optional
	InstancesRetrievable bool `json:"instancesRetrievable,omitempty"`

	// PlanUpdatable says whether an instance may move to another plan.
	// +optional
	PlanUpdatable bool `json:"planUpdatable,omitempty"`

	// AllowContextUpdates says whether the broker accepts updates that
	// change only the context of an instance (OSB 2.15).
	// +optional
	AllowContextUpdates bool `json:"allowContextUpdates,omitempty"`

	// Tags classify the service.
	// +optional
	// +listType=atomic
	Tags []string `json:"tags,omitempty"`

	// Requires lists the platform permissions the service needs
	// (syslog_drain, route_forwarding, volume_mount).
	// +optional
	// +listType=atomic
	Requires []string `json:"requires,omitempty"`

	// ExternalMetadata is the broker's free-form metadata for the service.
	// +optional
	ExternalMetadata *runtime.RawExtension `json:"externalMetadata,omitempty"`
}

// ClusterServiceClassStatus says whether the broker still offers a service.
type ClusterServiceClassStatus struct {
	// RemovedFromBrokerCatalog is true once the service is gone from the
	// broker's catalog while instances of it still exist.
	RemovedFromBrokerCatalog bool `json:"removedFromBrokerCatalog"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceClass is a service that a ServiceBroker offers, in the broker's
// namespace. Bindery creates, updates and removes them when it fetches the
// broker's catalog.
type ServiceClass struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the service as the broker describes it.
	// +optional
	Spec ServiceClassSpec `json:"spec,omitempty"`

	// Status says whether the broker still offers the service.
	// +optional
	Status ServiceClassStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceClassList is a list of ServiceClasses.
type ServiceClassList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServiceClasses.
	Items []ServiceClass `json:"items"`
}

// ServiceClassSpec is an OSB service object of a ServiceBroker: the fields
// of ClusterServiceClassSpec, the broker named by ServiceBrokerName.
type ServiceClassSpec struct {
	// ServiceBrokerName is the name of the ServiceBroker, in the same
	// namespace, that offers the service.
	ServiceBrokerName string `json:"serviceBrokerName"`

	CommonServiceClassSpec `json:",inline"`
}

// ServiceClassStatus says whether the broker still offers a service.
type ServiceClassStatus struct {
	// RemovedFromBrokerCatalog is true once the service is gone from the
	// broker's catalog while instances of it still exist.
	RemovedFromBrokerCatalog bool `json:"removedFromBrokerCatalog"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterServicePlan is a plan of a ClusterServiceClass (an OSB plan).
// Bindery maintains them from the broker's catalog.
type ClusterServicePlan struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the plan as the broker describes it.
	// +optional
	Spec ClusterServicePlanSpec `json:"spec,omitempty"`

	// Status says whether the broker still offers the plan.
	// +optional
	Status ClusterServicePlanStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterServicePlanList is a list of ClusterServicePlans.
type ClusterServicePlanList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterServicePlans.
	Items []ClusterServicePlan `json:"items"`
}

// ClusterServicePlanSpec is an OSB plan object.
type ClusterServicePlanSpec struct {
	// ClusterServiceBrokerName is the name of the broker that offers the
	// plan.
	ClusterServiceBrokerName string `json:"clusterServiceBrokerName"`

	CommonServicePlanSpec `json:",inline"`

	// ClusterServiceClassRef names the ClusterServiceClass of the plan.
	ClusterServiceClassRef ClusterObjectReference `json:"clusterServiceClassRef"`
}

// CommonServicePlanSpec is the OSB plan object, as both kinds of plan
// hold it.
type CommonServicePlanSpec struct {
	// ExternalName is the plan's name in the broker's catalog.
	ExternalName string `json:"externalName"`

	// ExternalID is the plan's id in the broker's catalog.
	ExternalID string `json:"externalID"`

	// Description is a short description of the plan.
	Description string `json:"description"`

	// Free says whether the plan costs nothing.
	Free bool `json:"free"`

	// Bindable, when set, overrides the class's Bindable for this plan.
	// +optional
	Bindable *bool `json:"bindable,omitempty"`

	// PlanUpdatable, when set, overrides the class's PlanUpdatable for this
	// plan.
	// +optional
	PlanUpdatable *bool `json:"planUpdatable,omitempty"`

	// BindingRotatable says whether bindings on this plan can be rotated
	// (OSB 2.17).
	// +optional
	BindingRotatable bool `json:"bindingRotatable,omitempty"`

	// MaximumPollingDuration is how long, in seconds, Bindery polls an
	// asynchronous operation on this plan before giving up (OSB 2.15).
	// +optional
	MaximumPollingDuration *int64 `json:"maximumPollingDuration,omitempty"`

	// MaintenanceInfo is the plan's current maintenance version (OSB 2.15).
	// +optional
	MaintenanceInfo *MaintenanceInfo `json:"maintenanceInfo,omitempty"`

	// ExternalMetadata is the broker's free-form metadata for the plan.
	// +optional
	ExternalMetadata *runtime.RawExtension `json:"externalMetadata,omitempty"`

	// InstanceCreateParameterSchema is the JSON schema of the parameters
	// accepted when provisioning.
	// +optional
	InstanceCreateParameterSchema *runtime.RawExtension `json:"instanceCreateParameterSchema,omitempty"`

	// InstanceUpdateParameterSchema is the JSON schema of the parameters
	// accepted when updating an instance.
	// +optional
	InstanceUpdateParameterSchema *runtime.RawExtension `json:"instanceUpdateParameterSchema,omitempty"`

	// ServiceBindingCreateParameterSchema is the JSON schema of the
	// parameters accepted when binding.
	// +optional
	ServiceBindingCreateParameterSchema *runtime.RawExtension `json:"serviceBindingCreateParameterSchema,omitempty"`
}

// MaintenanceInfo is the OSB maintenance_info of a plan.
type MaintenanceInfo struct {
	// Version is a semantic version.
	Version string `json:"version"`
	// Description says what the version changes.
	// +optional
	Description string `json:"description,omitempty"`
}

// ClusterServicePlanStatus says whether the broker still offers a plan.
type ClusterServicePlanStatus struct {
	// RemovedFromBrokerCatalog is true once the plan is gone from the
	// broker's catalog while instances on it still exist.
	RemovedFromBrokerCatalog bool `json:"removedFromBrokerCatalog"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServicePlan is a plan of a ServiceClass, in the namespace of its
// ServiceBroker. Bindery maintains them from the broker's catalog.
type ServicePlan struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the plan as the broker describes it.
	// +optional
	Spec ServicePlanSpec `json:"spec,omitempty"`

	// Status says whether the broker still offers the plan.
	// +optional
	Status ServicePlanStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServicePlanList is a list of ServicePlans.
type ServicePlanList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServicePlans.
	Items []ServicePlan `json:"items"`
}

// ServicePlanSpec is an OSB plan object of a ServiceBroker: the fields of
// ClusterServicePlanSpec, the broker and class named by ServiceBrokerName
// and ServiceClassRef.
type ServicePlanSpec struct {
	// ServiceBrokerName is the name of the ServiceBroker, in the same
	// namespace, that offers the plan.
	ServiceBrokerName string `json:"serviceBrokerName"`

	CommonServicePlanSpec `json:",inline"`

	// ServiceClassRef names the ServiceClass of the plan, in the same
	// namespace.
	ServiceClassRef LocalObjectReference `json:"serviceClassRef"`
}

// ServicePlanStatus says whether the broker still offers a plan.
type ServicePlanStatus struct {
	// RemovedFromBrokerCatalog is true once the plan is gone from the
	// broker's catalog while instances on it still exist.
	RemovedFromBrokerCatalog bool `json:"removedFromBrokerCatalog"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceInstance is a provisioned instance of a ClusterServicePlan or of a
// ServicePlan of its namespace.
type ServiceInstance struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the plan and the parameters to provision with.
	// +optional
	Spec ServiceInstanceSpec `json:"spec,omitempty"`

	// Status is what Bindery observed and did at the broker.
	// +optional
	Status ServiceInstanceStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceInstanceList is a list of ServiceInstances.
type ServiceInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServiceInstances.
	Items []ServiceInstance `json:"items"`
}

// PlanReference names the class and the plan of an instance, both, in
// exactly one of three ways: by external name (as the broker calls them), by
// external id, or by the names of the ClusterServiceClass and
// ClusterServicePlan; or, with the fields that do not start with Cluster, in
// one of the same three ways a ServiceClass and ServicePlan of the
// instance's namespace. The class cannot change; the plan can when the class
// is PlanUpdatable.
type PlanReference struct {
	// ClusterServiceClassExternalName is the class's name at the broker.
	// +optional
	ClusterServiceClassExternalName string `json:"clusterServiceClassExternalName,omitempty"`
	// ClusterServiceClassExternalID is the class's id at the broker.
	// +optional
	ClusterServiceClassExternalID string `json:"clusterServiceClassExternalID,omitempty"`
	// ClusterServicePlanExternalName is the plan's name at the broker.
	// +optional
	ClusterServicePlanExternalName string `json:"clusterServicePlanExternalName,omitempty"`
	// ClusterServicePlanExternalID is the plan's id at the broker.
	// +optional
	ClusterServicePlanExternalID string `json:"clusterServicePlanExternalID,omitempty"`
	// ClusterServiceClassName is the name of the ClusterServiceClass.
	// +optional
	ClusterServiceClassName string `json:"clusterServiceClassName,omitempty"`
	// ClusterServicePlanName is the name of the ClusterServicePlan.
	// +optional
	ClusterServicePlanName string `json:"clusterServicePlanName,omitempty"`
	// ServiceClassExternalName is the name at the broker of a ServiceClass
	// of the instance's namespace.
	// +optional
	ServiceClassExternalName string `json:"serviceClassExternalName,omitempty"`
	// ServiceClassExternalID is the id at the broker of a ServiceClass of
	// the instance's namespace.
	// +optional
	ServiceClassExternalID string `json:"serviceClassExternalID,omitempty"`
	// ServicePlanExternalName is the name at the broker of a ServicePlan of
	// the instance's namespace.
	// +optional
	ServicePlanExternalName string `json:"servicePlanExternalName,omitempty"`
	// ServicePlanExternalID is the id at the broker of a ServicePlan of the
	// instance's namespace.
	// +optional
	ServicePlanExternalID string `json:"servicePlanExternalID,omitempty"`
	// ServiceClassName is the name of a ServiceClass of the instance's
	// namespace.
	// +optional
	ServiceClassName string `json:"serviceClassName,omitempty"`
	// ServicePlanName is the name of a ServicePlan of the instance's
	// namespace.
	// +optional
	ServicePlanName string `json:"servicePlanName,omitempty"`
}

// ServiceInstanceSpec is the desired state of an instance.
type ServiceInstanceSpec struct {
	// PlanReference is the plan that the user asked for.
	PlanReference `json:",inline"`

	// ClusterServiceClassRef is the ClusterServiceClass that the
	// PlanReference resolved to; Bindery sets it.
	// +optional
	ClusterServiceClassRef *ClusterObjectReference `json:"clusterServiceClassRef,omitempty"`

	// ClusterServicePlanRef is the ClusterServicePlan that the PlanReference
	// resolved to; Bindery sets it.
	// +optional
	ClusterServicePlanRef *ClusterObjectReference `json:"clusterServicePlanRef,omitempty"`

	// ServiceClassRef is the ServiceClass, in the instance's namespace,
	// that the PlanReference resolved to; Bindery sets it.
	// +optional
	ServiceClassRef *LocalObjectReference `json:"serviceClassRef,omitempty"`

	// ServicePlanRef is the ServicePlan, in the instance's namespace, that
	// the PlanReference resolved to; Bindery sets it.
	// +optional
	ServicePlanRef *LocalObjectReference `json:"servicePlanRef,omitempty"`

	// Parameters are sent to the broker as they are. They are not secret:
	// put secrets in a Secret and name it in ParametersFrom.
	// +optional
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// ParametersFrom reads more parameters from Secrets. A top-level name
	// may come from only one source.
	// +optional
	// +listType=atomic
	ParametersFrom []ParametersFromSource `json:"parametersFrom,omitempty"`

	// ExternalID is the instance_id sent to the broker; Bindery generates
	// one when it is empty. It cannot change.
	// +optional
	ExternalID string `json:"externalID"`

	// UpdateRequests is a counter: incrementing it sends the parameters to
	// the broker again (to pick up changed Secrets).
	// +optional
	UpdateRequests int64 `json:"updateRequests,omitempty"`

	// UserInfo is who last changed the spec, sent to the broker as the
	// originating identity. The API server sets it; values sent by clients
	// are replaced.
	// +optional
	UserInfo *UserInfo `json:"userInfo,omitempty"`
}

// ParametersFromSource is a source of parameters.
type ParametersFromSource struct {
	// SecretKeyRef is a key of a Secret in the object's namespace whose
	// value is a JSON object.
	// +optional
	SecretKeyRef *SecretKeyReference `json:"secretKeyRef,omitempty"`
}

// SecretKeyReference names a key of a Secret in the object's namespace.
type SecretKeyReference struct {
	// Name is the Secret's name.
	Name string `json:"name"`
	// Key is the key within the Secret.
	Key string `json:"key"`
}

// UserInfo identifies a user, as the API server authenticated them.
type UserInfo struct {
	// Username is the user's name.
	Username string `json:"username"`
	// UID is the user's unique id.
	// +optional
	UID string `json:"uid,omitempty"`
	// Groups are the user's groups.
	// +optional
	// +listType=atomic
	Groups []string `json:"groups,omitempty"`
	// Extra holds further attributes from the authenticator.
	// +optional
	Extra map[string]ExtraValue `json:"extra,omitempty"`
}

// ExtraValue holds one of the authenticator's extra attributes of a user.
// +listType=atomic
type ExtraValue []string

// ServiceInstanceStatus is what Bindery observed and did for an instance.
type ServiceInstanceStatus struct {
	// Conditions say whether the instance is Ready, has Failed for good, or
	// needs OrphanMitigation.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []ServiceInstanceCondition `json:"conditions,omitempty"`

	// AsyncOpInProgress is true while the broker works on an asynchronous
	// operation.
	AsyncOpInProgress bool `json:"asyncOpInProgress"`

	// OrphanMitigationInProgress is true while Bindery deprovisions an
	// instance whose provisioning failed.
	OrphanMitigationInProgress bool `json:"orphanMitigationInProgress"`

	// LastOperation is the operation string the broker returned for the
	// asynchronous operation in progress; it is sent back when polling.
	// +optional
	LastOperation string `json:"lastOperation,omitempty"`

	// DashboardURL is the broker's management page for the instance.
	// +optional
	DashboardURL string `json:"dashboardURL,omitempty"`

	// CurrentOperation is what Bindery is doing: Provision, Update or
	// Deprovision.
	// +optional
	CurrentOperation ServiceInstanceOperation `json:"currentOperation,omitempty"`

	// ReconciledGeneration is the generation of the spec that the broker
	// last acted on, whether or not it succeeded.
	ReconciledGeneration int64 `json:"reconciledGeneration"`

	// ObservedGeneration is the generation of the spec that Bindery last
	// looked at.
	ObservedGeneration int64 `json:"observedGeneration"`

	// OperationStartTime is when CurrentOperation began.
	// +optional
	OperationStartTime *metav1.Time `json:"operationStartTime,omitempty"`

	// InProgressProperties is what was sent to the broker for the operation
	// in progress.
	// +optional
	InProgressProperties *ServiceInstancePropertiesState `json:"inProgressProperties,omitempty"`

	// ExternalProperties is what the broker last accepted.
	// +optional
	ExternalProperties *ServiceInstancePropertiesState `json:"externalProperties,omitempty"`

	// ProvisionStatus is Provisioned once the broker has provisioned the
	// instance, NotProvisioned before and after.
	// +optional
	ProvisionStatus ServiceInstanceProvisionStatus `json:"provisionStatus,omitempty"`

	// DeprovisionStatus says whether the broker must be asked to
	// deprovision before the instance goes away.
	DeprovisionStatus ServiceInstanceDeprovisionStatus `json:"deprovisionStatus"`

	// LastError is the last error from the broker or from Bindery, kept
	// until an operation succeeds.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// Retries is the engine's backoff for each failing operation
	// (Provision, Update, Deprovision): how many attempts failed in a row
	// and when the next one is due. It is kept in status so that every
	// engine replica, and an engine after a restart, honours it.
	// +optional
	Retries map[string]OperationRetry `json:"retries,omitempty"`
}

// OperationRetry is the engine's backoff for one failing operation.
type OperationRetry struct {
	// Failures is how many attempts in a row failed.
	Failures int32 `json:"failures"`
	// Requests is what those failures cost the broker: each request of a
	// failed attempt (the attempt and its polls), counted twice when the
	// attempt was orphan-mitigated. The backoff doubles with each.
	// +optional
	Requests int32 `json:"requests,omitempty"`
	// NextAttempt is when the operation may be tried again.
	NextAttempt metav1.Time `json:"nextAttempt"`
	// Generation is the spec generation the failures were for; a change to
	// the spec starts afresh.
	Generation int64 `json:"generation"`
}

// ServiceInstanceCondition is one aspect of an instance's state.
type ServiceInstanceCondition struct {
	// Type is Ready, Failed or OrphanMitigation.
	Type ServiceInstanceConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// Reason is a CamelCase word saying why.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says why, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// ServiceInstanceConditionType is the type of a ServiceInstanceCondition.
type ServiceInstanceConditionType string

// Instance condition types.
const (
	ServiceInstanceConditionReady            ServiceInstanceConditionType = "Ready"
	ServiceInstanceConditionFailed           ServiceInstanceConditionType = "Failed"
	ServiceInstanceConditionOrphanMitigation ServiceInstanceConditionType = "OrphanMitigation"
)

// ServiceInstanceOperation is an OSB operation on an instance.
type ServiceInstanceOperation string

// Instance operations.
const (
	ServiceInstanceOperationProvision   ServiceInstanceOperation = "Provision"
	ServiceInstanceOperationUpdate      ServiceInstanceOperation = "Update"
	ServiceInstanceOperationDeprovision ServiceInstanceOperation = "Deprovision"
)

// ServiceInstancePropertiesState is what was sent to a broker for an
// instance.
type ServiceInstancePropertiesState struct {
	// ClusterServicePlanExternalName is the plan's name at the broker.
	ClusterServicePlanExternalName string `json:"clusterServicePlanExternalName"`
	// ClusterServicePlanExternalID is the plan's id at the broker.
	ClusterServicePlanExternalID string `json:"clusterServicePlanExternalID"`
	// ServicePlanExternalName is, for a ServicePlan, the plan's name at the
	// broker (ClusterServicePlanExternalName is then empty).
	// +optional
	ServicePlanExternalName string `json:"servicePlanExternalName,omitempty"`
	// ServicePlanExternalID is, for a ServicePlan, the plan's id at the
	// broker.
	// +optional
	ServicePlanExternalID string `json:"servicePlanExternalID,omitempty"`
	// Parameters are the parameters sent, with values read from Secrets
	// replaced by "<redacted>".
	// +optional
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`
	// ParameterChecksum is a checksum of the parameters sent, Secrets
	// included, so that a change in a Secret is noticed.
	// +optional
	ParameterChecksum string `json:"parameterChecksum,omitempty"`
	// MaintenanceInfoVersion is the plan's maintenance_info version sent
	// (OSB 2.15).
	// +optional
	MaintenanceInfoVersion string `json:"maintenanceInfoVersion,omitempty"`
	// UserInfo is who asked for the operation.
	// +optional
	UserInfo *UserInfo `json:"userInfo,omitempty"`
}

// ServiceInstanceProvisionStatus says whether an instance is provisioned.
type ServiceInstanceProvisionStatus string

// Provision states.
const (
	ServiceInstanceProvisionStatusProvisioned    ServiceInstanceProvisionStatus = "Provisioned"
	ServiceInstanceProvisionStatusNotProvisioned ServiceInstanceProvisionStatus = "NotProvisioned"
)

// ServiceInstanceDeprovisionStatus says whether an instance must be
// deprovisioned at the broker before it goes away.
type ServiceInstanceDeprovisionStatus string

// Deprovision states.
const (
	// ServiceInstanceDeprovisionStatusNotRequired: the broker was never
	// asked to provision.
	ServiceInstanceDeprovisionStatusNotRequired ServiceInstanceDeprovisionStatus = "NotRequired"
	// ServiceInstanceDeprovisionStatusRequired: the broker must be asked
	// to deprovision.
	ServiceInstanceDeprovisionStatusRequired ServiceInstanceDeprovisionStatus = "Required"
	// ServiceInstanceDeprovisionStatusSucceeded: the broker deprovisioned.
	ServiceInstanceDeprovisionStatusSucceeded ServiceInstanceDeprovisionStatus = "Succeeded"
	// ServiceInstanceDeprovisionStatusFailed: Bindery gave up asking.
	ServiceInstanceDeprovisionStatusFailed ServiceInstanceDeprovisionStatus = "Failed"
)

// +genclient
// +genclient:method=GetCredentials,verb=get,subresource=credentials,result=ServiceBindingCredentials
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceBinding is a set of credentials for a ServiceInstance, delivered
// as a Secret in the binding's namespace, or, without one
// (the bindery.dev/no-secret annotation), through its credentials
// subresource.
type ServiceBinding struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the instance and says how to shape the Secret.
	// +optional
	Spec ServiceBindingSpec `json:"spec,omitempty"`

	// Status is what Bindery observed and did at the broker.
	// +optional
	Status ServiceBindingStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ServiceBindingList is a list of ServiceBindings.
type ServiceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServiceBindings.
	Items []ServiceBinding `json:"items"`
}

// ServiceBindingSpec is the desired state of a binding. Only the secret
// fields may change after creation.
type ServiceBindingSpec struct {
	// InstanceRef names the ServiceInstance, in the binding's namespace.
	InstanceRef LocalObjectReference `json:"instanceRef"`

	// Parameters are sent to the broker as they are. They are not secret:
	// put secrets in a Secret and name it in ParametersFrom.
	// +optional
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// ParametersFrom reads more parameters from Secrets. A top-level name
	// may come from only one source.
	// +optional
	// +listType=atomic
	ParametersFrom []ParametersFromSource `json:"parametersFrom,omitempty"`

	// SecretName is the Secret that receives the credentials; it defaults
	// to the binding's name.
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// PredecessorBindingRef names a binding of the same instance that this
	// one rotates (OSB 2.17 binding rotation): the broker creates new
	// credentials, and both stay valid until each is deleted. A Bindery
	// extension to v1beta1.
	// +optional
	PredecessorBindingRef *LocalObjectReference `json:"predecessorBindingRef,omitempty"`

	// SecretTransforms reshape the credentials before they are written to
	// the Secret, in order.
	// +optional
	// +listType=atomic
	SecretTransforms []SecretTransform `json:"secretTransforms,omitempty"`

	// ExternalID is the binding_id sent to the broker; Bindery generates one
	// when it is empty. It cannot change.
	// +optional
	ExternalID string `json:"externalID"`

	// UserInfo is who last changed the spec, sent to the broker as the
	// originating identity. The API server sets it.
	// +optional
	UserInfo *UserInfo `json:"userInfo,omitempty"`
}

// SecretTransform is one change to the credentials on their way into the
// Secret. Set exactly one member. For example
// {"renameKey": {"from": "USERNAME", "to": "DB_USER"}} stores the broker's
// USERNAME under DB_USER.
type SecretTransform struct {
	// RenameKey stores a key under another name.
	// +optional
	RenameKey *RenameKeyTransform `json:"renameKey,omitempty"`
	// AddKey adds a key.
	// +optional
	AddKey *AddKeyTransform `json:"addKey,omitempty"`
	// AddKeysFrom adds every key of another Secret.
	// +optional
	AddKeysFrom *AddKeysFromTransform `json:"addKeysFrom,omitempty"`
	// RemoveKey drops a key.
	// +optional
	RemoveKey *RemoveKeyTransform `json:"removeKey,omitempty"`
}

// RenameKeyTransform stores the credential From under the key To.
type RenameKeyTransform struct {
	// From is the broker's key.
	From string `json:"from"`
	// To is the key in the Secret.
	To string `json:"to"`
}

// AddKeyTransform adds a key to the Secret. Its value is the result of
// JSONPathExpression over the credentials if that is set, else StringValue if
// set, else Value. Use it for values that are not secret; AddKeysFrom reads
// secret ones from a Secret.
type AddKeyTransform struct {
	// Key is the key to add.
	Key string `json:"key"`
	// Value is a binary value (base64 in JSON).
	// +optional
	Value []byte `json:"value,omitempty"`
	// StringValue is a text value.
	// +optional
	StringValue string `json:"stringValue,omitempty"`
	// JSONPathExpression selects a value from the credentials, such as
	// "{.foo.bar}".
	// +optional
	JSONPathExpression string `json:"jsonPathExpression,omitempty"`
}

// AddKeysFromTransform adds every key of another Secret.
type AddKeysFromTransform struct {
	// SecretRef names the Secret.
	// +optional
	SecretRef *ObjectReference `json:"secretRef,omitempty"`
}

// RemoveKeyTransform drops a key from the credentials.
type RemoveKeyTransform struct {
	// Key is the key to drop.
	Key string `json:"key"`
}

// ServiceBindingStatus is what Bindery observed and did for a binding.
type ServiceBindingStatus struct {
	// Conditions say whether the binding is Ready or has Failed for good.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []ServiceBindingCondition `json:"conditions,omitempty"`

	// AsyncOpInProgress is true while the broker works on an asynchronous
	// operation.
	AsyncOpInProgress bool `json:"asyncOpInProgress"`

	// LastOperation is the operation string the broker returned for the
	// asynchronous operation in progress.
	// +optional
	LastOperation string `json:"lastOperation,omitempty"`

	// CurrentOperation is what Bindery is doing: Bind or Unbind.
	// +optional
	CurrentOperation ServiceBindingOperation `json:"currentOperation,omitempty"`

	// ReconciledGeneration is the generation of the spec that the broker
	// last acted on.
	ReconciledGeneration int64 `json:"reconciledGeneration"`

	// ObservedGeneration is the generation of the spec that Bindery last
	// looked at.
	ObservedGeneration int64 `json:"observedGeneration"`

	// OperationStartTime is when CurrentOperation began.
	// +optional
	OperationStartTime *metav1.Time `json:"operationStartTime,omitempty"`

	// OrphanMitigationInProgress is true while Bindery unbinds a binding
	// whose creation failed.
	OrphanMitigationInProgress bool `json:"orphanMitigationInProgress"`

	// UnbindStatus says whether the broker must be asked to unbind before
	// the binding goes away.
	UnbindStatus ServiceBindingUnbindStatus `json:"unbindStatus"`

	// ExternalProperties is what the broker last accepted.
	// +optional
	ExternalProperties *ServiceBindingPropertiesState `json:"externalProperties,omitempty"`

	// LastError is the last error from the broker or from Bindery, kept
	// until an operation succeeds.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// Retries is the engine's backoff for each failing operation (Bind,
	// Unbind), as on ServiceInstanceStatus.
	// +optional
	Retries map[string]OperationRetry `json:"retries,omitempty"`

	// Binding names the binding's Secret once it exists. It makes every
	// ServiceBinding a Provisioned Service of the Service Binding
	// Specification (servicebinding.io), which any implementation can bind.
	// +optional
	Binding *ServiceBindingSecretReference `json:"binding,omitempty"`

	// Endpoints are the network endpoints the broker returned with the
	// credentials (OSB 2.17).
	// +optional
	// +listType=atomic
	Endpoints []ServiceBindingEndpoint `json:"endpoints,omitempty"`
}

// ServiceBindingSecretReference names a Secret in the binding's namespace.
type ServiceBindingSecretReference struct {
	// Name of the Secret.
	Name string `json:"name"`
}

// ServiceBindingEndpoint is a network endpoint of a binding.
type ServiceBindingEndpoint struct {
	// Host is a host name or IP address.
	Host string `json:"host"`
	// Ports are single ports or ranges, such as 5432 or 6000-6010.
	// +listType=atomic
	Ports []string `json:"ports"`
	// Protocol is tcp, udp or all.
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// ServiceBindingCondition is one aspect of a binding's state.
type ServiceBindingCondition struct {
	// Type is Ready or Failed.
	Type ServiceBindingConditionType `json:"type"`
	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status"`
	// LastTransitionTime is when Status last changed.
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// Reason is a CamelCase word saying why.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message says why, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// ServiceBindingConditionType is the type of a ServiceBindingCondition.
type ServiceBindingConditionType string

// Binding condition types.
const (
	ServiceBindingConditionReady  ServiceBindingConditionType = "Ready"
	ServiceBindingConditionFailed ServiceBindingConditionType = "Failed"
)

// ServiceBindingOperation is an OSB operation on a binding.
type ServiceBindingOperation string

// Binding operations.
const (
	ServiceBindingOperationBind   ServiceBindingOperation = "Bind"
	ServiceBindingOperationUnbind ServiceBindingOperation = "Unbind"
)

// ServiceBindingUnbindStatus says whether a binding must be unbound at the
// broker before it goes away.
type ServiceBindingUnbindStatus string

// Unbind states.
const (
	// ServiceBindingUnbindStatusNotRequired: the broker was never asked to
	// bind.
	ServiceBindingUnbindStatusNotRequired ServiceBindingUnbindStatus = "NotRequired"
	// ServiceBindingUnbindStatusRequired: the broker must be asked to
	// unbind.
	ServiceBindingUnbindStatusRequired ServiceBindingUnbindStatus = "Required"
	// ServiceBindingUnbindStatusSucceeded: the broker unbound.
	ServiceBindingUnbindStatusSucceeded ServiceBindingUnbindStatus = "Succeeded"
	// ServiceBindingUnbindStatusFailed: Bindery gave up asking.
	ServiceBindingUnbindStatusFailed ServiceBindingUnbindStatus = "Failed"
)

// ServiceBindingPropertiesState is what was sent to a broker for a binding.
type ServiceBindingPropertiesState struct {
	// Parameters are the parameters sent, with values read from Secrets
	// replaced by "<redacted>".
	// +optional
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`
	// ParameterChecksum is a checksum of the parameters sent, Secrets
	// included.
	// +optional
	ParameterChecksum string `json:"parameterChecksum,omitempty"`
	// UserInfo is who asked for the operation.
	// +optional
	UserInfo *UserInfo `json:"userInfo,omitempty"`
}

// ObjectReference names an object, possibly in another namespace.
type ObjectReference struct {
	// Name of the object.
	Name string `json:"name"`
	// Namespace of the object.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// LocalObjectReference names an object in the referrer's namespace.
type LocalObjectReference struct {
	// Name of the object.
	Name string `json:"name"`
}

// ClusterObjectReference names a cluster-scoped object.
type ClusterObjectReference struct {
	// Name of the object.
	Name string `json:"name"`
}
