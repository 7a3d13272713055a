package resourcequota_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/catalog/resourcequota"
)

func TestLimits(t *testing.T) {
	t.Parallel()
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name                         string
		spec                         corev1.ResourceQuotaSpec
		instances, bindings, brokers *int64
	}{
		{"both", corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			resourcequota.Instances: resource.MustParse("10"), resourcequota.Bindings: resource.MustParse("1k"),
			corev1.ResourcePods: resource.MustParse("4")}}, n(10), n(1000), nil},
		{"brokers", corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{resourcequota.Brokers: resource.MustParse("2")}}, nil, nil, n(2)},
		{"instances only", corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{resourcequota.Instances: resource.MustParse("0")}}, n(0), nil, nil},
		{"none of ours", corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": resource.MustParse("3")}}, nil, nil, nil},
		{"scoped", corev1.ResourceQuotaSpec{Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort},
			Hard: corev1.ResourceList{resourcequota.Instances: resource.MustParse("1"), resourcequota.Brokers: resource.MustParse("1")}}, nil, nil, nil},
		{"scope selector", corev1.ResourceQuotaSpec{ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
			{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpExists}}},
			Hard: corev1.ResourceList{resourcequota.Instances: resource.MustParse("1"), resourcequota.Brokers: resource.MustParse("1")}}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := resourcequota.Limits(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "q"}, Spec: tc.spec})
			if got.Namespace != "team" || got.Name != "q" || !same(got.Instances, tc.instances) || !same(got.Bindings, tc.bindings) || !same(got.Brokers, tc.brokers) {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func same(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
