package apiserver

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// TestConvertNamespacedInstance: an instance naming a ServiceClass and
// ServicePlan of its namespace keeps every naming field and both
// references on its way to v1beta1 and back.
func TestConvertNamespacedInstance(t *testing.T) {
	t.Parallel()
	spec := catalog.InstanceSpec{
		ServiceClassExternalName: "user-provided-service", ServicePlanExternalName: "default",
		ServiceClassExternalID: "class-id", ServicePlanExternalID: "plan-id",
		ServiceClassName: "class-name", ServicePlanName: "plan-name",
		ServiceClassRef: &catalog.ObjectRef{Name: "class-name"}, ServicePlanRef: &catalog.ObjectRef{Name: "plan-name"},
		ExternalID: "instance-id",
	}
	status := catalog.InstanceStatus{ExternalProperties: &catalog.InstanceProperties{ServicePlanExternalName: "default", ServicePlanExternalID: "plan-id"}}
	m := catalog.Meta{ID: "1", Name: "db", Namespace: "team", CreationTimestamp: time.Now()}
	obj, err := typed(catalog.KindInstance, m, spec, status)
	if err != nil {
		t.Fatal(err)
	}
	in := obj.(*v1beta1.ServiceInstance)
	want := v1beta1.PlanReference{
		ServiceClassExternalName: "user-provided-service", ServicePlanExternalName: "default",
		ServiceClassExternalID: "class-id", ServicePlanExternalID: "plan-id",
		ServiceClassName: "class-name", ServicePlanName: "plan-name",
	}
	if in.Spec.PlanReference != want {
		t.Errorf("plan reference %+v, want %+v", in.Spec.PlanReference, want)
	}
	if in.Spec.ServiceClassRef == nil || in.Spec.ServiceClassRef.Name != "class-name" || in.Spec.ServicePlanRef == nil || in.Spec.ServicePlanRef.Name != "plan-name" {
		t.Errorf("references %+v %+v", in.Spec.ServiceClassRef, in.Spec.ServicePlanRef)
	}
	if p := in.Status.ExternalProperties; p == nil || p.ServicePlanExternalName != "default" || p.ServicePlanExternalID != "plan-id" {
		t.Errorf("external properties %+v", p)
	}
	table, err := instanceTable.convert(context.Background(), in, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Rows[0].Cells[:3]; !reflect.DeepEqual(got, []any{"db", "user-provided-service", "default"}) {
		t.Errorf("instance row %q", got)
	}
	// Back, as instanceStorage converts a request's spec.
	var back catalog.InstanceSpec
	if err := convertJSON(&in.Spec, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, spec) {
		t.Errorf("back in the catalog:\n%+v\nwant\n%+v", back, spec)
	}
}

// TestConvertServiceBroker: a ServiceBroker's Secret is its namespace's:
// the catalog's reference names that namespace, the API's none.
func TestConvertServiceBroker(t *testing.T) {
	t.Parallel()
	pem := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	spec := catalog.BrokerSpec{URL: "https://broker.example", CABundle: pem, RelistBehavior: catalog.RelistDuration, RelistDuration: "15m0s",
		AuthInfo: &catalog.BrokerAuthInfo{Basic: &catalog.BasicAuthInfo{SecretRef: &catalog.ObjectRef{Name: "creds", Namespace: "team"}}}}
	m := catalog.Meta{ID: "1", Name: "ups", Namespace: "team", CreationTimestamp: time.Now()}
	obj, err := typed(catalog.KindNamespacedBroker, m, spec, catalog.BrokerStatus{ServiceClassCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, ok := obj.(*v1beta1.ServiceBroker)
	if !ok {
		t.Fatalf("converted to %T", obj)
	}
	if b.Namespace != "team" || string(b.Spec.CABundle) != pem || b.Status.ServiceClassCount != 3 {
		t.Errorf("broker %+v", b)
	}
	if a := b.Spec.AuthInfo; a == nil || a.Basic == nil || a.Basic.SecretRef == nil || a.Basic.SecretRef.Name != "creds" {
		t.Fatalf("authInfo %+v", a)
	}
	raw, _ := json.Marshal(b.Spec.AuthInfo)
	if string(raw) != `{"basic":{"username":"","secretRef":{"name":"creds"}}}` {
		t.Errorf("authInfo JSON %s", raw)
	}
	// A request names the Secret without a namespace.
	b.Spec.AuthInfo.Basic.SecretRef = &v1beta1.LocalObjectReference{Name: "creds"}
	back, err := brokerSpecOf(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, spec) {
		t.Errorf("back in the catalog:\n%+v\nwant\n%+v", back, spec)
	}
}

// TestConvertServiceClassAndPlan: the namespaced classes and plans name
// their broker and class in their own fields, and kubectl shows those.
func TestConvertServiceClassAndPlan(t *testing.T) {
	t.Parallel()
	m := catalog.Meta{ID: "1", Name: "class-id", Namespace: "team", CreationTimestamp: time.Now()}
	obj, err := typed(catalog.KindNamespacedServiceClass, m,
		catalog.ServiceClassSpec{ServiceBrokerName: "ups", ExternalName: "user-provided-service", ExternalID: "class-id", Description: "A user provided service"},
		catalog.ServiceClassStatus{})
	if err != nil {
		t.Fatal(err)
	}
	class, ok := obj.(*v1beta1.ServiceClass)
	if !ok || class.Spec.ServiceBrokerName != "ups" || class.Spec.ExternalName != "user-provided-service" || class.Namespace != "team" {
		t.Fatalf("class %T %+v", obj, obj)
	}
	table, err := classTable.convert(context.Background(), class, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Rows[0].Cells[:4]; !reflect.DeepEqual(got, []any{"class-id", "user-provided-service", "ups", "A user provided service"}) {
		t.Errorf("class row %q", got)
	}

	m.Name = "plan-id"
	obj, err = typed(catalog.KindNamespacedServicePlan, m,
		catalog.ServicePlanSpec{ServiceBrokerName: "ups", ExternalName: "default", ExternalID: "plan-id", Free: true,
			ServiceClassRef: catalog.ObjectRef{Name: "class-id", Namespace: "team"}},
		catalog.ServicePlanStatus{})
	if err != nil {
		t.Fatal(err)
	}
	plan, ok := obj.(*v1beta1.ServicePlan)
	if !ok || plan.Spec.ServiceBrokerName != "ups" || plan.Spec.ServiceClassRef.Name != "class-id" {
		t.Fatalf("plan %T %+v", obj, obj)
	}
	table, err = planTable.convert(context.Background(), plan, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Rows[0].Cells[:5]; !reflect.DeepEqual(got, []any{"plan-id", "default", "ups", "class-id", true}) {
		t.Errorf("plan row %q", got)
	}

	broker := &v1beta1.ServiceBroker{Spec: v1beta1.ServiceBrokerSpec{CommonServiceBrokerSpec: v1beta1.CommonServiceBrokerSpec{URL: "https://ups.example"}},
		Status: v1beta1.ServiceBrokerStatus{Conditions: []v1beta1.ServiceBrokerCondition{{Type: v1beta1.ServiceBrokerConditionReady, Status: v1beta1.ConditionTrue}}}}
	broker.Name = "ups"
	table, err = brokerTable.convert(context.Background(), broker, &metav1.TableOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Rows[0].Cells[:3]; !reflect.DeepEqual(got, []any{"ups", "https://ups.example", "Ready"}) {
		t.Errorf("broker row %q", got)
	}
}
