package catalog

import (
	"encoding/json"
	"time"
)

// The objects of the catalog, in the field names of Service Catalog's
// servicecatalog.k8s.io/v1beta1 (camelCase), so that the REST API, the
// Kubernetes API and the engine read and write the same rows.

// Kinds, as the change feed and events name them. Brokers, classes and
// plans are cluster-scoped (ClusterServiceBroker, …) or, with a namespace,
// namespaced (ServiceBroker, …), as in Service Catalog: the same rows and
// code, the kind told by the namespace.
const (
	KindBroker       = "ClusterServiceBroker"
	KindServiceClass = "ClusterServiceClass"
	KindServicePlan  = "ClusterServicePlan"
	KindInstance     = "ServiceInstance"
	KindBinding      = "ServiceBinding"

	KindNamespacedBroker       = "ServiceBroker"
	KindNamespacedServiceClass = "ServiceClass"
	KindNamespacedServicePlan  = "ServicePlan"
)

// Meta is what every object carries besides spec and status.
type Meta struct {
	ID                string            `json:"id"`
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
	Generation        int64             `json:"generation"`
	ResourceVersion   int64             `json:"resourceVersion"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
	// Extra holds the rest of a Kubernetes object's metadata
	// (ownerReferences, managedFields, generateName, …) whole, so the
	// Kubernetes API gives back what it was given.
	Extra json.RawMessage `json:"-"`
}

// Condition is a status condition, as Kubernetes shows them.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
}

// Condition types and statuses.
const (
	ConditionReady            = "Ready"
	ConditionFailed           = "Failed"
	ConditionOrphanMitigation = "OrphanMitigation"

	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// SetCondition sets a condition, keeping its transition time when its
// status does not change. It reports whether anything changed.
func SetCondition(conds *[]Condition, c Condition, now time.Time) bool {
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return false
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		*old = c
		return true
	}
	c.LastTransitionTime = now
	*conds = append(*conds, c)
	return true
}

// FindCondition returns the condition of the given type, if any.
func FindCondition(conds []Condition, typ string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// Broker is a registered OSB broker: a ClusterServiceBroker, or, with a
// namespace, a ServiceBroker whose classes and plans only that namespace
// sees.
type Broker struct {
	Meta
	Spec   BrokerSpec   `json:"spec"`
	Status BrokerStatus `json:"status"`
}

// BrokerSpec says where the broker is and how to talk to it.
type BrokerSpec struct {
	URL                   string               `json:"url"`
	InsecureSkipTLSVerify bool                 `json:"insecureSkipTLSVerify,omitempty"`
	CABundle              string               `json:"caBundle,omitempty"`
	RelistBehavior        string               `json:"relistBehavior"`
	RelistDuration        string               `json:"relistDuration,omitempty"`
	RelistRequests        int64                `json:"relistRequests,omitempty"`
	CatalogRestrictions   *CatalogRestrictions `json:"catalogRestrictions,omitempty"`
	// AuthInfo tells which credentials are presented; the secrets
	// themselves are sealed apart and never returned.
	AuthInfo *BrokerAuthInfo `json:"authInfo,omitempty"`
}

// Relist behaviours.
const (
	RelistDuration = "Duration"
	RelistManual   = "Manual"
)

// BrokerAuthInfo names the kind of credentials (and the basic username).
type BrokerAuthInfo struct {
	Basic  *BasicAuthInfo  `json:"basic,omitempty"`
	Bearer *BearerAuthInfo `json:"bearer,omitempty"`
}

// BasicAuthInfo shows the username of basic auth; the password is sealed.
type BasicAuthInfo struct {
	Username string `json:"username"`
	// SecretRef names a Kubernetes Secret holding the credentials, for
	// brokers registered through the Kubernetes API.
	SecretRef *ObjectRef `json:"secretRef,omitempty"`
}

// BearerAuthInfo says a bearer token is presented; the token is sealed.
type BearerAuthInfo struct {
	SecretRef *ObjectRef `json:"secretRef,omitempty"`
}

// ObjectRef names another object.
type ObjectRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// CatalogRestrictions filter what of a broker's catalogue is exposed:
// requirements in label-selector syntax over the fields of classes
// (spec.externalName, spec.externalID, name) and plans (the same plus
// spec.free, spec.clusterServiceClass.name).
type CatalogRestrictions struct {
	ServiceClass []string `json:"serviceClass,omitempty"`
	ServicePlan  []string `json:"servicePlan,omitempty"`
}

// BrokerStatus reports the last catalogue fetch.
type BrokerStatus struct {
	Conditions               []Condition `json:"conditions,omitempty"`
	ReconciledGeneration     int64       `json:"reconciledGeneration,omitempty"`
	LastCatalogRetrievalTime *time.Time  `json:"lastCatalogRetrievalTime,omitempty"`
	NextRelistTime           *time.Time  `json:"nextRelistTime,omitempty"`
	ServiceClassCount        int         `json:"serviceClassCount"`
	ServicePlanCount         int         `json:"servicePlanCount"`
}

// BrokerAuth is the secret part of how Bindery authenticates to a broker.
type BrokerAuth struct {
	Basic  *BasicAuth  `json:"basic,omitempty"`
	Bearer *BearerAuth `json:"bearer,omitempty"`
}

// BasicAuth is HTTP basic authentication.
type BasicAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// BearerAuth is a bearer token.
type BearerAuth struct {
	Token string `json:"token"`
}

// ServiceClass is a service offered by a broker: a ClusterServiceClass, or
// a ServiceClass in the namespace of its ServiceBroker.
type ServiceClass struct {
	Meta
	Spec   ServiceClassSpec   `json:"spec"`
	Status ServiceClassStatus `json:"status"`

	broker   string // the broker's id
	position int    // in the broker's catalogue
}

// ServiceClassSpec mirrors the OSB service object. A class names its
// broker in ClusterServiceBrokerName or, when namespaced, ServiceBrokerName.
type ServiceClassSpec struct {
	ClusterServiceBrokerName string          `json:"clusterServiceBrokerName,omitempty"`
	ServiceBrokerName        string          `json:"serviceBrokerName,omitempty"`
	ExternalName             string          `json:"externalName"`
	ExternalID               string          `json:"externalID"`
	Description              string          `json:"description"`
	Bindable                 bool            `json:"bindable"`
	BindingRetrievable       bool            `json:"bindingRetrievable,omitempty"`
	InstancesRetrievable     bool            `json:"instancesRetrievable,omitempty"`
	PlanUpdatable            bool            `json:"planUpdatable,omitempty"`
	AllowContextUpdates      bool            `json:"allowContextUpdates,omitempty"`
	Tags                     []string        `json:"tags,omitempty"`
	Requires                 []string        `json:"requires,omitempty"`
	ExternalMetadata         json.RawMessage `json:"externalMetadata,omitempty"`
}

// BrokerName is the name of the class's broker, in the class's scope.
func (s *ServiceClassSpec) BrokerName() string {
	if s.ServiceBrokerName != "" {
		return s.ServiceBrokerName
	}
	return s.ClusterServiceBrokerName
}

// ServiceClassStatus says whether the broker still offers the class.
type ServiceClassStatus struct {
	RemovedFromBrokerCatalog bool `json:"removedFromBrokerCatalog"`
}

// ServicePlan is a plan of a service class: a ClusterServicePlan, or a
// ServicePlan in the namespace of its ServiceBroker.
type ServicePlan struct {
	Meta
	Spec   ServicePlanSpec   `json:"spec"`
	Status ServicePlanStatus `json:"status"`

	broker   string // the broker's id
	position int    // in the broker's catalogue
}

// ServicePlanSpec mirrors the OSB plan object. A plan names its broker and
// class in the Cluster… fields or, when namespaced, in ServiceBrokerName
// and ServiceClassRef.
type ServicePlanSpec struct {
	ClusterServiceBrokerName            string           `json:"clusterServiceBrokerName,omitempty"`
	ServiceBrokerName                   string           `json:"serviceBrokerName,omitempty"`
	ExternalName                        string           `json:"externalName"`
	ExternalID                          string           `json:"externalID"`
	Description                         string           `json:"description"`
	Free                                bool             `json:"free"`
	Bindable                            *bool            `json:"bindable,omitempty"`
	PlanUpdatable                       *bool            `json:"planUpdatable,omitempty"`
	BindingRotatable                    bool             `json:"bindingRotatable,omitempty"`
	MaximumPollingDuration              *int64           `json:"maximumPollingDuration,omitempty"`
	MaintenanceInfo                     *MaintenanceInfo `json:"maintenanceInfo,omitempty"`
	ExternalMetadata                    json.RawMessage  `json:"externalMetadata,omitempty"`
	InstanceCreateParameterSchema       json.RawMessage  `json:"instanceCreateParameterSchema,omitempty"`
	InstanceUpdateParameterSchema       json.RawMessage  `json:"instanceUpdateParameterSchema,omitempty"`
	ServiceBindingCreateParameterSchema json.RawMessage  `json:"serviceBindingCreateParameterSchema,omitempty"`
	ClusterServiceClassRef              ObjectRef        `json:"clusterServiceClassRef,omitzero"`
	ServiceClassRef                     ObjectRef        `json:"serviceClassRef,omitzero"`
}

// BrokerName is the name of the plan's broker, in the plan's scope.
func (s *ServicePlanSpec) BrokerName() string {
	if s.ServiceBrokerName != "" {
		return s.ServiceBrokerName
	}
	return s.ClusterServiceBrokerName
}

// ClassName is the object name of the plan's class, in the plan's scope.
func (s *ServicePlanSpec) ClassName() string {
	if s.ServiceClassRef.Name != "" {
		return s.ServiceClassRef.Name
	}
	return s.ClusterServiceClassRef.Name
}

// MaintenanceInfo is the OSB maintenance_info of a plan.
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// ServicePlanStatus says whether the broker still offers the plan.
type ServicePlanStatus struct {
	RemovedFromBrokerCatalog bool `json:"removedFromBrokerCatalog"`
}

// Instance is a service instance (ServiceInstance).
type Instance struct {
	Meta
	Spec   InstanceSpec   `json:"spec"`
	Status InstanceStatus `json:"status"`
}

// InstanceSpec is the desired state of an instance. The plan is named by
// external name, external id or object name, as in Service Catalog: a
// cluster-scoped one by the Cluster… fields, a namespaced one (of the
// instance's namespace) by the others. The Refs are the resolved names.
type InstanceSpec struct {
	ClusterServiceClassExternalName string           `json:"clusterServiceClassExternalName,omitempty"`
	ClusterServiceClassExternalID   string           `json:"clusterServiceClassExternalID,omitempty"`
	ClusterServicePlanExternalName  string           `json:"clusterServicePlanExternalName,omitempty"`
	ClusterServicePlanExternalID    string           `json:"clusterServicePlanExternalID,omitempty"`
	ClusterServiceClassName         string           `json:"clusterServiceClassName,omitempty"`
	ClusterServicePlanName          string           `json:"clusterServicePlanName,omitempty"`
	ServiceClassExternalName        string           `json:"serviceClassExternalName,omitempty"`
	ServiceClassExternalID          string           `json:"serviceClassExternalID,omitempty"`
	ServicePlanExternalName         string           `json:"servicePlanExternalName,omitempty"`
	ServicePlanExternalID           string           `json:"servicePlanExternalID,omitempty"`
	ServiceClassName                string           `json:"serviceClassName,omitempty"`
	ServicePlanName                 string           `json:"servicePlanName,omitempty"`
	ClusterServiceClassRef          *ObjectRef       `json:"clusterServiceClassRef,omitempty"`
	ClusterServicePlanRef           *ObjectRef       `json:"clusterServicePlanRef,omitempty"`
	ServiceClassRef                 *ObjectRef       `json:"serviceClassRef,omitempty"`
	ServicePlanRef                  *ObjectRef       `json:"servicePlanRef,omitempty"`
	Parameters                      json.RawMessage  `json:"parameters,omitempty"`
	ParametersFrom                  []ParametersFrom `json:"parametersFrom,omitempty"`
	ExternalID                      string           `json:"externalID"`
	UpdateRequests                  int64            `json:"updateRequests,omitempty"`
	UserInfo                        *UserInfo        `json:"userInfo,omitempty"`
}

// ParametersFrom reads parameters from a Kubernetes Secret key.
type ParametersFrom struct {
	SecretKeyRef *SecretKeyRef `json:"secretKeyRef,omitempty"`
}

// SecretKeyRef names a key of a Secret in the object's namespace.
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// UserInfo is who asked for an object, sent to brokers as the
// originating identity.
type UserInfo struct {
	Username string              `json:"username"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// InstanceStatus is what the engine observed and did.
type InstanceStatus struct {
	Conditions                 []Condition         `json:"conditions,omitempty"`
	AsyncOpInProgress          bool                `json:"asyncOpInProgress"`
	OrphanMitigationInProgress bool                `json:"orphanMitigationInProgress"`
	LastOperation              string              `json:"lastOperation,omitempty"`
	DashboardURL               string              `json:"dashboardURL,omitempty"`
	CurrentOperation           string              `json:"currentOperation,omitempty"`
	ReconciledGeneration       int64               `json:"reconciledGeneration"`
	ObservedGeneration         int64               `json:"observedGeneration"`
	OperationStartTime         *time.Time          `json:"operationStartTime,omitempty"`
	InProgressProperties       *InstanceProperties `json:"inProgressProperties,omitempty"`
	ExternalProperties         *InstanceProperties `json:"externalProperties,omitempty"`
	ProvisionStatus            string              `json:"provisionStatus,omitempty"`
	DeprovisionStatus          string              `json:"deprovisionStatus"`
	LastError                  string              `json:"lastError,omitempty"`
	// Retries is the engine's backoff per failing operation (see Retry).
	Retries map[string]Retry `json:"retries,omitempty"`
}

// InstanceProperties is what was (or is being) sent to the broker: the
// plan in the Cluster… fields, or the ServicePlan… ones for a namespaced
// plan.
type InstanceProperties struct {
	ClusterServicePlanExternalName string          `json:"clusterServicePlanExternalName"`
	ClusterServicePlanExternalID   string          `json:"clusterServicePlanExternalID"`
	ServicePlanExternalName        string          `json:"servicePlanExternalName,omitempty"`
	ServicePlanExternalID          string          `json:"servicePlanExternalID,omitempty"`
	Parameters                     json.RawMessage `json:"parameters,omitempty"`
	ParameterChecksum              string          `json:"parameterChecksum,omitempty"`
	MaintenanceInfoVersion         string          `json:"maintenanceInfoVersion,omitempty"`
	UserInfo                       *UserInfo       `json:"userInfo,omitempty"`
}

// PropertiesOf is what an instance's properties say of plan: in the
// Cluster… fields for a cluster-scoped plan, in the ServicePlan… ones for
// a namespaced plan, as Service Catalog recorded them.
func PropertiesOf(plan *ServicePlan) InstanceProperties {
	if plan.Namespace != "" {
		return InstanceProperties{ServicePlanExternalName: plan.Spec.ExternalName, ServicePlanExternalID: plan.Spec.ExternalID}
	}
	return InstanceProperties{ClusterServicePlanExternalName: plan.Spec.ExternalName, ClusterServicePlanExternalID: plan.Spec.ExternalID}
}

// PlanID is the OSB id of the plan the properties were sent with.
func (p *InstanceProperties) PlanID() string {
	if p.ServicePlanExternalID != "" {
		return p.ServicePlanExternalID
	}
	return p.ClusterServicePlanExternalID
}

// PlanName is the OSB name of the plan the properties were sent with
// (the web's instances list shows it).
func (p *InstanceProperties) PlanName() string {
	if p.ServicePlanExternalName != "" {
		return p.ServicePlanExternalName
	}
	return p.ClusterServicePlanExternalName
}

// Instance operations (status.currentOperation) and provision and
// deprovision states, as Service Catalog names them.
const (
	OperationProvision   = "Provision"
	OperationUpdate      = "Update"
	OperationDeprovision = "Deprovision"
	OperationBind        = "Bind"
	OperationUnbind      = "Unbind"

	ProvisionStatusProvisioned    = "Provisioned"
	ProvisionStatusNotProvisioned = "NotProvisioned"

	DeprovisionNotRequired = "NotRequired"
	DeprovisionRequired    = "Required"
	DeprovisionSucceeded   = "Succeeded"
	DeprovisionFailed      = "Failed"
)

// Binding is a service binding (ServiceBinding).
type Binding struct {
	Meta
	Spec   BindingSpec   `json:"spec"`
	Status BindingStatus `json:"status"`
}

// BindingSpec is the desired state of a binding.
type BindingSpec struct {
	InstanceRef    ObjectRef        `json:"instanceRef"`
	Parameters     json.RawMessage  `json:"parameters,omitempty"`
	ParametersFrom []ParametersFrom `json:"parametersFrom,omitempty"`
	SecretName     string           `json:"secretName,omitempty"`
	// PredecessorBindingRef names a binding of the same instance that this
	// one rotates (OSB binding rotation); both stay valid until each is
	// deleted.
	PredecessorBindingRef *BindingRef       `json:"predecessorBindingRef,omitempty"`
	SecretTransforms      []SecretTransform `json:"secretTransforms,omitempty"`
	ExternalID            string            `json:"externalID"`
	UserInfo              *UserInfo         `json:"userInfo,omitempty"`
}

// BindingRef names a binding in the same namespace.
type BindingRef struct {
	Name string `json:"name"`
}

// SecretTransform changes the credentials on their way into a Secret.
type SecretTransform struct {
	RenameKey   *RenameKeyTransform   `json:"renameKey,omitempty"`
	AddKey      *AddKeyTransform      `json:"addKey,omitempty"`
	AddKeysFrom *AddKeysFromTransform `json:"addKeysFrom,omitempty"`
	RemoveKey   *RemoveKeyTransform   `json:"removeKey,omitempty"`
}

// RenameKeyTransform renames a key.
type RenameKeyTransform struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// AddKeyTransform adds a key with a value (or a JSONPath into the
// credentials).
type AddKeyTransform struct {
	Key                string `json:"key"`
	Value              []byte `json:"value,omitempty"`
	StringValue        string `json:"stringValue,omitempty"`
	JSONPathExpression string `json:"jsonPathExpression,omitempty"`
}

// AddKeysFromTransform adds every key of another Secret.
type AddKeysFromTransform struct {
	SecretRef *ObjectRef `json:"secretRef,omitempty"`
}

// RemoveKeyTransform removes a key.
type RemoveKeyTransform struct {
	Key string `json:"key"`
}

// BindingStatus is what the engine observed and did.
type BindingStatus struct {
	Conditions                 []Condition        `json:"conditions,omitempty"`
	AsyncOpInProgress          bool               `json:"asyncOpInProgress"`
	LastOperation              string             `json:"lastOperation,omitempty"`
	CurrentOperation           string             `json:"currentOperation,omitempty"`
	ReconciledGeneration       int64              `json:"reconciledGeneration"`
	ObservedGeneration         int64              `json:"observedGeneration"`
	OperationStartTime         *time.Time         `json:"operationStartTime,omitempty"`
	OrphanMitigationInProgress bool               `json:"orphanMitigationInProgress"`
	UnbindStatus               string             `json:"unbindStatus"`
	ExternalProperties         *BindingProperties `json:"externalProperties,omitempty"`
	LastError                  string             `json:"lastError,omitempty"`
	// Retries is the engine's backoff per failing operation (see Retry).
	Retries map[string]Retry `json:"retries,omitempty"`
	// Binding names the binding's Secret once it exists, which makes the
	// binding a Provisioned Service of the servicebinding.io specification.
	Binding *SecretReference `json:"binding,omitempty"`
	// Endpoints are those the broker returned with the credentials.
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// BindingProperties is what was sent to the broker for a binding.
type BindingProperties struct {
	Parameters        json.RawMessage `json:"parameters,omitempty"`
	ParameterChecksum string          `json:"parameterChecksum,omitempty"`
	UserInfo          *UserInfo       `json:"userInfo,omitempty"`
}

// Unbind states.
const (
	UnbindNotRequired = "NotRequired"
	UnbindRequired    = "Required"
	UnbindSucceeded   = "Succeeded"
	UnbindFailed      = "Failed"
)

// Event is one entry of an object's history.
type Event struct {
	ID        int64  `json:"id"`
	Kind      string `json:"kind"`
	ObjectID  string `json:"objectID"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Operation string `json:"operation,omitempty"`
	// Time is when the entry was first recorded; LastTime when it was
	// last, and Count how many times: identical entries are folded into
	// one, as Kubernetes folds repeated Events.
	Time     time.Time `json:"time"`
	LastTime time.Time `json:"lastTime"`
	Count    int       `json:"count"`
}
