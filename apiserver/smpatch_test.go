package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestBadStrategicMergeDirectives: a strategic merge patch whose directives
// k8s.io/apimachinery's strategicpatch cannot apply ($patch with an unknown
// value, $setElementOrder or $deleteFromPrimitiveList that are no lists,
// directives on fields that are no lists) is the client's mistake: 400
// with strategicpatch's sentence, never 500, on every kind and on status.
func TestBadStrategicMergeDirectives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	createDB(t, b)
	rc := b.client.ServicecatalogV1beta1().RESTClient()
	for _, body := range []string{
		`{"metadata":{"finalizers":[{"$patch":"bogus"}]}}`,
		`{"metadata":{"$patch":"bogus"}}`,
		`{"metadata":{"labels":{"$patch":"bogus"}}}`,
		`{"metadata":{"$setElementOrder/finalizers":[{"a":1}]}}`,
		`{"metadata":{"$setElementOrder/finalizers":"x"}}`,
		`{"metadata":{"$setElementOrder/labels":["a"]}}`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":"x"}}`,
		`{"metadata":{"$deleteFromPrimitiveList/finalizers":[{"a":1}]}}`,
		`{"metadata":{"$retainKeys":"x"}}`,
		`{"metadata":{"$retainKeys":[1]}}`,
		`{"metadata":{"finalizers":[{"$patch":"replace"}]}}`,
		`{"metadata":{"ownerReferences":[{"$patch":"bogus"}]}}`,
		`{"spec":{"$patch":"bogus"}}`,
		`{"status":{"conditions":[{"$patch":"bogus"}]}}`,
		`{"$patch":"bogus"}`,
	} {
		for _, target := range []struct{ ns, resource, name, sub string }{
			{"a", "serviceinstances", "db", ""},
			{"a", "serviceinstances", "db", "status"},
			{"", "clusterservicebrokers", "fake", ""},
		} {
			req := rc.Patch(types.StrategicMergePatchType).Resource(target.resource).Name(target.name).Body([]byte(body))
			if target.ns != "" {
				req = req.Namespace(target.ns)
			}
			if target.sub != "" {
				req = req.SubResource(target.sub)
			}
			var code int
			err := req.Do(ctx).StatusCode(&code).Error()
			if code >= http.StatusInternalServerError || (err != nil && !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err)) {
				t.Errorf("%s %s/%s: %d %v, want 400 or 422 (or success)", body, target.resource, target.sub, code, err)
			}
		}
	}
	_, err := b.client.ServicecatalogV1beta1().ServiceInstances("a").Patch(ctx, "db", types.StrategicMergePatchType,
		[]byte(`{"metadata":{"$patch":"bogus"}}`), metav1.PatchOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "unknown patch type: bogus") {
		t.Errorf("$patch bogus: %v, want 400 naming the unknown patch type", err)
	}
}
