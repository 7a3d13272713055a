package v1beta1

import (
	"fmt"
	"reflect"
	"strconv"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// SelectableFields returns the fields that a list or watch of obj's kind can
// filter on with a field selector (kubectl get --field-selector), with obj's
// values. The API server's storage matches selectors against this set, and
// the scheme accepts exactly these names (see addFieldLabelConversionFuncs),
// so the two cannot drift apart. It returns nil for other objects.
func SelectableFields(obj runtime.Object) fields.Set {
	switch o := obj.(type) {
	case *ClusterServiceBroker:
		return fields.Set{"metadata.name": o.Name}
	case *ClusterServiceClass:
		return fields.Set{
			"metadata.name":                 o.Name,
			"spec.clusterServiceBrokerName": o.Spec.ClusterServiceBrokerName,
			"spec.externalName":             o.Spec.ExternalName,
			"spec.externalID":               o.Spec.ExternalID,
		}
	case *ClusterServicePlan:
		return fields.Set{
			"metadata.name":                    o.Name,
			"spec.clusterServiceBrokerName":    o.Spec.ClusterServiceBrokerName,
			"spec.clusterServiceClassRef.name": o.Spec.ClusterServiceClassRef.Name,
			"spec.externalName":                o.Spec.ExternalName,
			"spec.externalID":                  o.Spec.ExternalID,
			"spec.free":                        strconv.FormatBool(o.Spec.Free),
		}
	case *ServiceBroker:
		return fields.Set{"metadata.name": o.Name, "metadata.namespace": o.Namespace}
	case *ServiceClass:
		return fields.Set{
			"metadata.name":          o.Name,
			"metadata.namespace":     o.Namespace,
			"spec.serviceBrokerName": o.Spec.ServiceBrokerName,
			"spec.externalName":      o.Spec.ExternalName,
			"spec.externalID":        o.Spec.ExternalID,
		}
	case *ServicePlan:
		return fields.Set{
			"metadata.name":             o.Name,
			"metadata.namespace":        o.Namespace,
			"spec.serviceBrokerName":    o.Spec.ServiceBrokerName,
			"spec.serviceClassRef.name": o.Spec.ServiceClassRef.Name,
			"spec.externalName":         o.Spec.ExternalName,
			"spec.externalID":           o.Spec.ExternalID,
			"spec.free":                 strconv.FormatBool(o.Spec.Free),
		}
	case *ServiceInstance:
		s := &o.Spec
		return fields.Set{
			"metadata.name":                        o.Name,
			"metadata.namespace":                   o.Namespace,
			"spec.clusterServiceClassExternalName": s.ClusterServiceClassExternalName,
			"spec.clusterServiceClassExternalID":   s.ClusterServiceClassExternalID,
			"spec.clusterServicePlanExternalName":  s.ClusterServicePlanExternalName,
			"spec.clusterServicePlanExternalID":    s.ClusterServicePlanExternalID,
			"spec.clusterServiceClassName":         s.ClusterServiceClassName,
			"spec.clusterServicePlanName":          s.ClusterServicePlanName,
			"spec.clusterServiceClassRef.name":     refName(s.ClusterServiceClassRef),
			"spec.clusterServicePlanRef.name":      refName(s.ClusterServicePlanRef),
			"spec.serviceClassExternalName":        s.ServiceClassExternalName,
			"spec.serviceClassExternalID":          s.ServiceClassExternalID,
			"spec.servicePlanExternalName":         s.ServicePlanExternalName,
			"spec.servicePlanExternalID":           s.ServicePlanExternalID,
			"spec.serviceClassName":                s.ServiceClassName,
			"spec.servicePlanName":                 s.ServicePlanName,
			"spec.serviceClassRef.name":            localRefName(s.ServiceClassRef),
			"spec.servicePlanRef.name":             localRefName(s.ServicePlanRef),
			"spec.externalID":                      s.ExternalID,
		}
	case *ServiceBinding:
		return fields.Set{
			"metadata.name":         o.Name,
			"metadata.namespace":    o.Namespace,
			"spec.instanceRef.name": o.Spec.InstanceRef.Name,
			"spec.secretName":       o.Spec.SecretName,
			"spec.externalID":       o.Spec.ExternalID,
		}
	}
	return nil
}

func refName(r *ClusterObjectReference) string {
	if r == nil {
		return ""
	}
	return r.Name
}

func localRefName(r *LocalObjectReference) string {
	if r == nil {
		return ""
	}
	return r.Name
}

// addFieldLabelConversionFuncs lets field selectors name the fields of
// SelectableFields; without it the API server accepts only metadata.name
// and metadata.namespace and answers 400 to the rest.
func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	for _, obj := range knownTypes() {
		allowed := SelectableFields(obj)
		if allowed == nil {
			continue // a list
		}
		kind := reflect.TypeOf(obj).Elem().Name()
		err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind), func(label, value string) (string, string, error) {
			if _, ok := allowed[label]; !ok {
				return "", "", fmt.Errorf("field label not supported for %s: %s", kind, label)
			}
			return label, value, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
