package apiserver

import (
	"context"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// kindInfo is what the API server knows of one kind: how to make its
// objects and lists, where their parts are, its table and the hooks of
// its strategy. A nil hook means the kind has nothing to do there.
type kindInfo struct {
	kind            string // the catalog's kind
	newObj, newList func() runtime.Object
	parts           func(obj runtime.Object) (om *metav1.ObjectMeta, spec, status any)
	finalizer       bool // shows Bindery's finalizer (showsFinalizer)
	table           tableConvertor
	decodeSpec      func(r *catalog.RawObject, spec any) error // else the spec is the catalog's JSON
	prepareCreate   func(ctx context.Context, obj runtime.Object)
	prepareUpdate   func(ctx context.Context, obj, old runtime.Object)
	keepSpec        func(obj, old runtime.Object) // the status subresource's update
	validateUpdate  func(obj, old runtime.Object) field.ErrorList
	brokerAuth      func(obj runtime.Object) *v1beta1.ClusterServiceBrokerAuthInfo
	brokerSpec      func(obj runtime.Object) (catalog.BrokerSpec, error)
	updateStatus    func(ctx context.Context, store *catalog.Store, obj runtime.Object, id string, expect int64) (runtime.Object, error)
}

// kinds are the eight kinds, by catalog kind.
var kinds = map[string]*kindInfo{}

// kindsByType are the same, by the Go type of their objects.
var kindsByType = map[reflect.Type]*kindInfo{}

func init() {
	for _, k := range []*kindInfo{
		instanceKind, bindingKind, clusterBrokerKind, brokerKind,
		clusterClassKind, classKind, clusterPlanKind, planKind,
	} {
		kinds[k.kind] = k
		kindsByType[reflect.TypeOf(k.newObj())] = k
	}
}

// kindOf is the kind of obj, nil for an object of none.
func kindOf(obj runtime.Object) *kindInfo { return kindsByType[reflect.TypeOf(obj)] }

var instanceKind = &kindInfo{
	kind:    catalog.KindInstance,
	newObj:  func() runtime.Object { return &v1beta1.ServiceInstance{} },
	newList: func() runtime.Object { return &v1beta1.ServiceInstanceList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ServiceInstance)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	finalizer: true,
	table:     instanceTable,
	prepareCreate: func(ctx context.Context, obj runtime.Object) {
		o := obj.(*v1beta1.ServiceInstance)
		o.Status = v1beta1.ServiceInstanceStatus{}
		o.Spec.UserInfo = userInfo(ctx)
	},
	prepareUpdate: prepareInstanceUpdate,
	keepSpec: func(obj, old runtime.Object) {
		obj.(*v1beta1.ServiceInstance).Spec = old.(*v1beta1.ServiceInstance).Spec
	},
	validateUpdate: validateInstanceUpdate,
	updateStatus:   updateInstanceStatus,
}

var bindingKind = &kindInfo{
	kind:    catalog.KindBinding,
	newObj:  func() runtime.Object { return &v1beta1.ServiceBinding{} },
	newList: func() runtime.Object { return &v1beta1.ServiceBindingList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ServiceBinding)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	finalizer: true,
	table:     bindingTable,
	prepareCreate: func(ctx context.Context, obj runtime.Object) {
		o := obj.(*v1beta1.ServiceBinding)
		o.Status = v1beta1.ServiceBindingStatus{}
		o.Spec.UserInfo = userInfo(ctx)
	},
	prepareUpdate: func(_ context.Context, obj, old runtime.Object) {
		o, prev := obj.(*v1beta1.ServiceBinding), old.(*v1beta1.ServiceBinding)
		o.Status = prev.Status
		o.Spec.UserInfo = prev.Spec.UserInfo
		// What the catalog filled in at the creation: a replace with the
		// manifest the binding was created from (kubectl replace) keeps
		// it, as kube-apiserver keeps a Service's clusterIP.
		if o.Spec.ExternalID == "" {
			o.Spec.ExternalID = prev.Spec.ExternalID
		}
		if o.Spec.SecretName == "" {
			o.Spec.SecretName = prev.Spec.SecretName
		}
	},
	keepSpec: func(obj, old runtime.Object) {
		obj.(*v1beta1.ServiceBinding).Spec = old.(*v1beta1.ServiceBinding).Spec
	},
	validateUpdate: validateBindingUpdate,
	updateStatus:   updateBindingStatus,
}

var clusterBrokerKind = &kindInfo{
	kind:    catalog.KindBroker,
	newObj:  func() runtime.Object { return &v1beta1.ClusterServiceBroker{} },
	newList: func() runtime.Object { return &v1beta1.ClusterServiceBrokerList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ClusterServiceBroker)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	table:      clusterBrokerTable,
	decodeSpec: decodeBrokerSpec,
	prepareCreate: func(_ context.Context, obj runtime.Object) {
		obj.(*v1beta1.ClusterServiceBroker).Status = v1beta1.ClusterServiceBrokerStatus{}
	},
	prepareUpdate: func(_ context.Context, obj, old runtime.Object) {
		obj.(*v1beta1.ClusterServiceBroker).Status = old.(*v1beta1.ClusterServiceBroker).Status
	},
	brokerAuth: func(obj runtime.Object) *v1beta1.ClusterServiceBrokerAuthInfo {
		return obj.(*v1beta1.ClusterServiceBroker).Spec.AuthInfo
	},
	brokerSpec: func(obj runtime.Object) (catalog.BrokerSpec, error) {
		return brokerSpecFrom(&obj.(*v1beta1.ClusterServiceBroker).Spec, "")
	},
}

var brokerKind = &kindInfo{
	kind:    catalog.KindNamespacedBroker,
	newObj:  func() runtime.Object { return &v1beta1.ServiceBroker{} },
	newList: func() runtime.Object { return &v1beta1.ServiceBrokerList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ServiceBroker)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	table:      brokerTable,
	decodeSpec: decodeBrokerSpec,
	prepareCreate: func(_ context.Context, obj runtime.Object) {
		obj.(*v1beta1.ServiceBroker).Status = v1beta1.ServiceBrokerStatus{}
	},
	prepareUpdate: func(_ context.Context, obj, old runtime.Object) {
		obj.(*v1beta1.ServiceBroker).Status = old.(*v1beta1.ServiceBroker).Status
	},
	brokerAuth: namespacedBrokerAuth,
	brokerSpec: func(obj runtime.Object) (catalog.BrokerSpec, error) {
		o := obj.(*v1beta1.ServiceBroker)
		return brokerSpecFrom(&o.Spec, o.Namespace)
	},
}

var clusterClassKind = &kindInfo{
	kind:    catalog.KindServiceClass,
	newObj:  func() runtime.Object { return &v1beta1.ClusterServiceClass{} },
	newList: func() runtime.Object { return &v1beta1.ClusterServiceClassList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ClusterServiceClass)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	table: clusterClassTable,
}

var classKind = &kindInfo{
	kind:    catalog.KindNamespacedServiceClass,
	newObj:  func() runtime.Object { return &v1beta1.ServiceClass{} },
	newList: func() runtime.Object { return &v1beta1.ServiceClassList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ServiceClass)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	table: classTable,
}

var clusterPlanKind = &kindInfo{
	kind:    catalog.KindServicePlan,
	newObj:  func() runtime.Object { return &v1beta1.ClusterServicePlan{} },
	newList: func() runtime.Object { return &v1beta1.ClusterServicePlanList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ClusterServicePlan)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	table: clusterPlanTable,
}

var planKind = &kindInfo{
	kind:    catalog.KindNamespacedServicePlan,
	newObj:  func() runtime.Object { return &v1beta1.ServicePlan{} },
	newList: func() runtime.Object { return &v1beta1.ServicePlanList{} },
	parts: func(obj runtime.Object) (*metav1.ObjectMeta, any, any) {
		o := obj.(*v1beta1.ServicePlan)
		return &o.ObjectMeta, &o.Spec, &o.Status
	},
	table: planTable,
}
