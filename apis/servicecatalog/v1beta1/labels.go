package v1beta1

import (
	"crypto/sha256"
	"encoding/hex"
)

// The labels Service Catalog v0.3 put on classes, plans and instances, so
// that clients (svcat among them) find objects by the fields they name
// with a label selector; the catalog derives them from the spec. The value
// of each is SpecLabelValue of the field's value, never the value itself:
// a label value holds at most 63 characters of a restricted alphabet,
// which an external name may exceed. Cluster-scoped classes carry the
// first three, their plans also LabelClusterServiceClassRef; namespaced
// classes carry the external ID and name and LabelServiceBrokerName, their
// plans also LabelServiceClassRef; instances carry their two references'
// once they are resolved.
const (
	LabelExternalID               = GroupName + "/spec.externalID"
	LabelExternalName             = GroupName + "/spec.externalName"
	LabelClusterServiceBrokerName = GroupName + "/spec.clusterServiceBrokerName"
	LabelClusterServiceClassRef   = GroupName + "/spec.clusterServiceClassRef.name"
	LabelClusterServicePlanRef    = GroupName + "/spec.clusterServicePlanRef.name"
	LabelServiceBrokerName        = GroupName + "/spec.serviceBrokerName"
	LabelServiceClassRef          = GroupName + "/spec.serviceClassRef.name"
	LabelServicePlanRef           = GroupName + "/spec.servicePlanRef.name"
)

// SpecLabelValue is the label value of a field's value: its SHA-224 digest
// in lower-case hex (56 characters), as Service Catalog computed it.
func SpecLabelValue(s string) string {
	sum := sha256.Sum224([]byte(s))
	return hex.EncodeToString(sum[:])
}
