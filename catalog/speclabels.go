package catalog

import (
	"maps"
	"slices"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// setSpecLabels puts Service Catalog's labels on a class, a plan or an
// instance, derived from its spec over any value given them, as the
// trigger of migration 0009 (catalog.spec_labels) does on its row: the
// trigger keeps every stored row right, whatever writes it, for label
// selectors in SQL; this keeps the same labels on the objects a write
// returns and the change feed carries. Other kinds are left as they are.
func setSpecLabels(obj object) {
	var managed []string
	derived := map[string]string{}
	switch o := obj.(type) {
	case *ServiceClass:
		managed = []string{v1beta1.LabelExternalID, v1beta1.LabelExternalName, v1beta1.LabelClusterServiceBrokerName}
		derived[v1beta1.LabelExternalID] = v1beta1.SpecLabelValue(o.Spec.ExternalID)
		derived[v1beta1.LabelExternalName] = v1beta1.SpecLabelValue(o.Spec.ExternalName)
		derived[v1beta1.LabelClusterServiceBrokerName] = v1beta1.SpecLabelValue(o.Spec.ClusterServiceBrokerName)
	case *ServicePlan:
		managed = []string{v1beta1.LabelExternalID, v1beta1.LabelExternalName, v1beta1.LabelClusterServiceBrokerName, v1beta1.LabelClusterServiceClassRef}
		derived[v1beta1.LabelExternalID] = v1beta1.SpecLabelValue(o.Spec.ExternalID)
		derived[v1beta1.LabelExternalName] = v1beta1.SpecLabelValue(o.Spec.ExternalName)
		derived[v1beta1.LabelClusterServiceBrokerName] = v1beta1.SpecLabelValue(o.Spec.ClusterServiceBrokerName)
		derived[v1beta1.LabelClusterServiceClassRef] = v1beta1.SpecLabelValue(o.Spec.ClusterServiceClassRef.Name)
	case *Instance:
		// The class reference's once it is resolved, the plan's once both
		// are, as Service Catalog's webhook had it.
		managed = []string{v1beta1.LabelClusterServiceClassRef, v1beta1.LabelClusterServicePlanRef}
		if c := o.Spec.ClusterServiceClassRef; c != nil {
			derived[v1beta1.LabelClusterServiceClassRef] = v1beta1.SpecLabelValue(c.Name)
			if p := o.Spec.ClusterServicePlanRef; p != nil {
				derived[v1beta1.LabelClusterServicePlanRef] = v1beta1.SpecLabelValue(p.Name)
			}
		}
	default:
		return
	}
	m := obj.meta()
	labels := maps.Clone(m.Labels)
	maps.DeleteFunc(labels, func(k, _ string) bool { return slices.Contains(managed, k) })
	if len(derived) > 0 && labels == nil {
		labels = make(map[string]string, len(derived))
	}
	maps.Copy(labels, derived)
	if len(labels) == 0 {
		labels = nil
	}
	m.Labels = labels
}
