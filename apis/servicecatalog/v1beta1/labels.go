package v1beta1

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/runtime"
)

// The labels Service Catalog v0.3 put on classes, plans and instances, so
// that clients (svcat among them) find objects by the fields they name
// with a label selector. The value of each is SpecLabelValue of the
// field's value, never the value itself: a label value holds at most 63
// characters of a restricted alphabet, which an external name may exceed.
const (
	LabelExternalID               = GroupName + "/spec.externalID"
	LabelExternalName             = GroupName + "/spec.externalName"
	LabelClusterServiceBrokerName = GroupName + "/spec.clusterServiceBrokerName"
	LabelClusterServiceClassRef   = GroupName + "/spec.clusterServiceClassRef.name"
	LabelClusterServicePlanRef    = GroupName + "/spec.clusterServicePlanRef.name"
)

// SpecLabelValue is the label value of a field's value: its SHA-224 digest
// in lower-case hex (56 characters), as Service Catalog computed it.
func SpecLabelValue(s string) string {
	sum := sha256.Sum224([]byte(s))
	return hex.EncodeToString(sum[:])
}

// SpecLabelKeys are the label keys the server derives from the spec of
// obj's kind: clients cannot set them, the server keeps them equal to the
// spec. Nil for kinds without any.
func SpecLabelKeys(obj runtime.Object) []string {
	switch obj.(type) {
	case *ClusterServiceClass:
		return []string{LabelExternalID, LabelExternalName, LabelClusterServiceBrokerName}
	case *ClusterServicePlan:
		return []string{LabelExternalID, LabelExternalName, LabelClusterServiceClassRef, LabelClusterServiceBrokerName}
	case *ServiceInstance:
		return []string{LabelClusterServiceClassRef, LabelClusterServicePlanRef}
	}
	return nil
}

// SpecLabels returns the labels of SpecLabelKeys with obj's values, as
// Service Catalog's admission webhooks set them: every key on a class or a
// plan; on an instance, the class reference's once it is resolved, and
// the plan reference's once both are.
func SpecLabels(obj runtime.Object) map[string]string {
	switch o := obj.(type) {
	case *ClusterServiceClass:
		return map[string]string{
			LabelExternalID:               SpecLabelValue(o.Spec.ExternalID),
			LabelExternalName:             SpecLabelValue(o.Spec.ExternalName),
			LabelClusterServiceBrokerName: SpecLabelValue(o.Spec.ClusterServiceBrokerName),
		}
	case *ClusterServicePlan:
		return map[string]string{
			LabelExternalID:               SpecLabelValue(o.Spec.ExternalID),
			LabelExternalName:             SpecLabelValue(o.Spec.ExternalName),
			LabelClusterServiceClassRef:   SpecLabelValue(o.Spec.ClusterServiceClassRef.Name),
			LabelClusterServiceBrokerName: SpecLabelValue(o.Spec.ClusterServiceBrokerName),
		}
	case *ServiceInstance:
		out := map[string]string{}
		if r := o.Spec.ClusterServiceClassRef; r != nil {
			out[LabelClusterServiceClassRef] = SpecLabelValue(r.Name)
			if p := o.Spec.ClusterServicePlanRef; p != nil {
				out[LabelClusterServicePlanRef] = SpecLabelValue(p.Name)
			}
		}
		return out
	}
	return nil
}
