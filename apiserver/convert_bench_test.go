package apiserver

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// BenchmarkFromRawInstance times the conversion of one listed instance
// (the work per object of every list and watch event), Service Catalog's
// spec labels included.
func BenchmarkFromRawInstance(b *testing.B) {
	spec, err := json.Marshal(catalog.InstanceSpec{
		ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync",
		ClusterServiceClassRef: &catalog.ObjectRef{Name: "0f6d3f1c-8d5e-4b8e-9a55-6f1d2c7b8a01"},
		ClusterServicePlanRef:  &catalog.ObjectRef{Name: "8b0a3e52-6d1f-4f0e-8c1e-2a4b9d7c6e10"},
		ExternalID:             "5c2b7a9e-1d3f-4e6a-8b0c-9d7e6f5a4b3c",
		Parameters:             json.RawMessage(`{"statement_timeout_ms": 5000}`),
	})
	if err != nil {
		b.Fatal(err)
	}
	status, err := json.Marshal(catalog.InstanceStatus{ProvisionStatus: catalog.ProvisionStatusProvisioned,
		Conditions: []catalog.Condition{{Type: catalog.ConditionReady, Status: catalog.ConditionTrue, Reason: "ProvisionedSuccessfully", LastTransitionTime: time.Now()}}})
	if err != nil {
		b.Fatal(err)
	}
	raw := &catalog.RawObject{Meta: catalog.Meta{ID: "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d", Name: "db", Namespace: "team",
		Labels: map[string]string{"app": "db"}, Generation: 1, ResourceVersion: 42, CreationTimestamp: time.Now()}, Spec: spec, Status: status}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fromRaw(catalog.KindInstance, raw); err != nil {
			b.Fatal(err)
		}
	}
}
