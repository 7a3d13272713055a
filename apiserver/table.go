package apiserver

import (
	"cmp"
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// tableConvertor gives kubectl get its columns: NAME, the resource's own,
// then AGE.
type tableConvertor struct {
	columns []metav1.TableColumnDefinition
	cells   func(obj runtime.Object) []any
	// parts are the members of spec and status cells reads: a Table
	// without the objects is read with only those (tableParts).
	parts catalog.Parts
}

func (t tableConvertor) convert(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{ColumnDefinitions: t.columnDefinitions(opts)}
	add := func(o runtime.Object) error {
		row, err := t.row(o)
		if err != nil {
			return err
		}
		table.Rows = append(table.Rows, row)
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, add); err != nil {
			return nil, err
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion, table.Continue = l.GetResourceVersion(), l.GetContinue()
		}
		return table, nil
	}
	if err := add(obj); err != nil {
		return nil, err
	}
	if m, err := meta.Accessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// columnDefinitions are the table's columns, none when opts (a
// metav1.TableOptions) ask for no headers.
func (t tableConvertor) columnDefinitions(opts runtime.Object) []metav1.TableColumnDefinition {
	if o, ok := opts.(*metav1.TableOptions); ok && o.NoHeaders {
		return nil
	}
	cols := append([]metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "The object's name."},
	}, t.columns...)
	return append(cols, metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: "Time since the object was created."})
}

// row is an object's row: its name, the resource's cells, its age.
func (t tableConvertor) row(o runtime.Object) (metav1.TableRow, error) {
	m, err := meta.Accessor(o)
	if err != nil {
		return metav1.TableRow{}, err
	}
	cells := append([]any{m.GetName()}, t.cells(o)...)
	cells = append(cells, age(m.GetCreationTimestamp()))
	return metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: o}}, nil
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

func col(name, description string) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Description: description}
}

// objectStatus is the one word kubectl shows for an object's state.
func objectStatus(deleting bool, ready, failed *v1beta1.ConditionStatus, readyReason string) string {
	switch {
	case deleting:
		return "Deleting"
	case failed != nil && *failed == v1beta1.ConditionTrue:
		return "Failed"
	case ready != nil && *ready == v1beta1.ConditionTrue:
		return "Ready"
	case readyReason != "":
		return readyReason
	}
	return "Pending"
}

var instanceTable = tableConvertor{
	columns: []metav1.TableColumnDefinition{
		col("Class", "The service class (its external name, as the broker calls it)."),
		col("Plan", "The plan (its external name)."),
		col("Status", "Ready, Failed, Deleting or why it is not ready yet."),
	},
	parts: catalog.Parts{
		Spec: []string{"clusterServiceClassExternalName", "serviceClassExternalName", "clusterServiceClassExternalID",
			"serviceClassExternalID", "clusterServiceClassName", "serviceClassName",
			"clusterServicePlanExternalName", "servicePlanExternalName", "clusterServicePlanExternalID",
			"servicePlanExternalID", "clusterServicePlanName", "servicePlanName"},
		StatusJSON: []string{"conditions"},
	},
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ServiceInstance)
		// The class and plan as the spec names them: by external name
		// where it does, of whichever scope.
		s := &o.Spec
		class := cmp.Or(s.ClusterServiceClassExternalName, s.ServiceClassExternalName, s.ClusterServiceClassExternalID,
			s.ServiceClassExternalID, s.ClusterServiceClassName, s.ServiceClassName)
		plan := cmp.Or(s.ClusterServicePlanExternalName, s.ServicePlanExternalName, s.ClusterServicePlanExternalID,
			s.ServicePlanExternalID, s.ClusterServicePlanName, s.ServicePlanName)
		var ready, failed *v1beta1.ConditionStatus
		reason := ""
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			switch c.Type {
			case v1beta1.ServiceInstanceConditionReady:
				ready, reason = &c.Status, c.Reason
			case v1beta1.ServiceInstanceConditionFailed:
				failed = &c.Status
			}
		}
		return []any{class, plan, objectStatus(o.DeletionTimestamp != nil, ready, failed, reason)}
	},
}

var bindingTable = tableConvertor{
	columns: []metav1.TableColumnDefinition{
		col("Service-Instance", "The instance bound."),
		col("Secret-Name", "The Secret that receives the credentials."),
		col("Status", "Ready, Failed, Deleting or why it is not ready yet."),
	},
	parts: catalog.Parts{Spec: []string{"secretName"}, SpecJSON: []string{"instanceRef"}, StatusJSON: []string{"conditions"}},
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ServiceBinding)
		var ready, failed *v1beta1.ConditionStatus
		reason := ""
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			switch c.Type {
			case v1beta1.ServiceBindingConditionReady:
				ready, reason = &c.Status, c.Reason
			case v1beta1.ServiceBindingConditionFailed:
				failed = &c.Status
			}
		}
		return []any{o.Spec.InstanceRef.Name, o.Spec.SecretName, objectStatus(o.DeletionTimestamp != nil, ready, failed, reason)}
	},
}

// The tables of classes, plans and brokers have the columns Service
// Catalog's CRDs gave kubectl, for both scopes; the broker and class
// columns name the objects of the row's scope.

var (
	classColumns = []metav1.TableColumnDefinition{
		col("External-Name", "The class's name at the broker."),
		col("Broker", "The broker that offers it."),
		{Name: "Description", Type: "string", Description: "What the service is.", Priority: 1},
	}
	planColumns = []metav1.TableColumnDefinition{
		col("External-Name", "The plan's name at the broker."),
		col("Broker", "The broker that offers it."),
		col("Class", "The class of the plan."),
		{Name: "Free", Type: "boolean", Description: "Whether the plan costs nothing.", Priority: 1},
	}
	brokerColumns = []metav1.TableColumnDefinition{
		col("URL", "The broker's OSB API."),
		col("Status", "Ready when the catalog was fetched, else why not."),
	}
)

var clusterClassTable = tableConvertor{
	columns: classColumns,
	parts:   catalog.Parts{Spec: []string{"externalName", "clusterServiceBrokerName", "description"}},
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ClusterServiceClass)
		return []any{o.Spec.ExternalName, o.Spec.ClusterServiceBrokerName, o.Spec.Description}
	},
}

var classTable = tableConvertor{
	columns: classColumns,
	parts:   catalog.Parts{Spec: []string{"externalName", "serviceBrokerName", "description"}},
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ServiceClass)
		return []any{o.Spec.ExternalName, o.Spec.ServiceBrokerName, o.Spec.Description}
	},
}

var clusterPlanTable = tableConvertor{
	columns: planColumns,
	parts:   catalog.Parts{Spec: []string{"externalName", "clusterServiceBrokerName"}, SpecJSON: []string{"clusterServiceClassRef", "free"}},
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ClusterServicePlan)
		return []any{o.Spec.ExternalName, o.Spec.ClusterServiceBrokerName, o.Spec.ClusterServiceClassRef.Name, o.Spec.Free}
	},
}

var planTable = tableConvertor{
	columns: planColumns,
	parts:   catalog.Parts{Spec: []string{"externalName", "serviceBrokerName"}, SpecJSON: []string{"serviceClassRef", "free"}},
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ServicePlan)
		return []any{o.Spec.ExternalName, o.Spec.ServiceBrokerName, o.Spec.ServiceClassRef.Name, o.Spec.Free}
	},
}

var clusterBrokerTable = tableConvertor{
	columns: brokerColumns,
	parts:   brokerParts,
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ClusterServiceBroker)
		return brokerCells(o.Spec.URL, o.Status.Conditions, o.DeletionTimestamp != nil)
	},
}

var brokerTable = tableConvertor{
	columns: brokerColumns,
	parts:   brokerParts,
	cells: func(obj runtime.Object) []any {
		o := obj.(*v1beta1.ServiceBroker)
		return brokerCells(o.Spec.URL, o.Status.Conditions, o.DeletionTimestamp != nil)
	},
}

// brokerParts are what brokerCells reads.
var brokerParts = catalog.Parts{Spec: []string{"url"}, StatusJSON: []string{"conditions"}}

// brokerCells are a broker's cells, of either kind.
func brokerCells(url string, conds []v1beta1.ServiceBrokerCondition, deleting bool) []any {
	var ready, failed *v1beta1.ConditionStatus
	reason := ""
	for i := range conds {
		c := &conds[i]
		switch c.Type {
		case v1beta1.ServiceBrokerConditionReady:
			ready, reason = &c.Status, c.Reason
		case v1beta1.ServiceBrokerConditionFailed:
			failed = &c.Status
		}
	}
	return []any{url, objectStatus(deleting, ready, failed, reason)}
}
