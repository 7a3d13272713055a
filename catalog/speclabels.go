package catalog

import (
	"maps"
	"slices"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// setSpecLabels puts Service Catalog's labels on a class, a plan or an
// instance, derived from its spec over any value given them, as the
// trigger of migrations 0009 and 0011 (catalog.spec_labels) does on its row: the
// trigger keeps every stored row right, whatever writes it, for label
// selectors in SQL; this keeps the same labels on the objects a write
// returns and the change feed carries. Other kinds are left as they are.
func setSpecLabels(obj object) {
	var managed []string
	derived := map[string]string{}
	switch o := obj.(type) {
	case *ServiceClass:
		broker, brokerName := v1beta1.LabelClusterServiceBrokerName, o.Spec.ClusterServiceBrokerName
		if o.Namespace != "" {
			broker, brokerName = v1beta1.LabelServiceBrokerName, o.Spec.ServiceBrokerName
		}
		managed = []string{v1beta1.LabelExternalID, v1beta1.LabelExternalName, broker}
		derived[v1beta1.LabelExternalID] = v1beta1.SpecLabelValue(o.Spec.ExternalID)
		derived[v1beta1.LabelExternalName] = v1beta1.SpecLabelValue(o.Spec.ExternalName)
		derived[broker] = v1beta1.SpecLabelValue(brokerName)
	case *ServicePlan:
		broker, brokerName := v1beta1.LabelClusterServiceBrokerName, o.Spec.ClusterServiceBrokerName
		class, className := v1beta1.LabelClusterServiceClassRef, o.Spec.ClusterServiceClassRef.Name
		if o.Namespace != "" {
			broker, brokerName = v1beta1.LabelServiceBrokerName, o.Spec.ServiceBrokerName
			class, className = v1beta1.LabelServiceClassRef, o.Spec.ServiceClassRef.Name
		}
		managed = []string{v1beta1.LabelExternalID, v1beta1.LabelExternalName, broker, class}
		derived[v1beta1.LabelExternalID] = v1beta1.SpecLabelValue(o.Spec.ExternalID)
		derived[v1beta1.LabelExternalName] = v1beta1.SpecLabelValue(o.Spec.ExternalName)
		derived[broker] = v1beta1.SpecLabelValue(brokerName)
		derived[class] = v1beta1.SpecLabelValue(className)
	case *Instance:
		// The class reference's once it is resolved, the plan's once both
		// are, as Service Catalog's webhook had it.
		managed = []string{v1beta1.LabelClusterServiceClassRef, v1beta1.LabelClusterServicePlanRef,
			v1beta1.LabelServiceClassRef, v1beta1.LabelServicePlanRef}
		if c := o.Spec.ClusterServiceClassRef; c != nil {
			derived[v1beta1.LabelClusterServiceClassRef] = v1beta1.SpecLabelValue(c.Name)
			if p := o.Spec.ClusterServicePlanRef; p != nil {
				derived[v1beta1.LabelClusterServicePlanRef] = v1beta1.SpecLabelValue(p.Name)
			}
		} else if c := o.Spec.ServiceClassRef; c != nil {
			derived[v1beta1.LabelServiceClassRef] = v1beta1.SpecLabelValue(c.Name)
			if p := o.Spec.ServicePlanRef; p != nil {
				derived[v1beta1.LabelServicePlanRef] = v1beta1.SpecLabelValue(p.Name)
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
