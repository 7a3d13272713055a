package apiserver

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
)

// TestStrategyValidation: what the strategies check before the catalog
// sees an object, every problem at once, each with its field path and type.
func TestStrategyValidation(t *testing.T) {
	t.Parallel()
	ref := &v1beta1.ObjectReference{Name: "creds", Namespace: "bindery"}
	broker := func(a *v1beta1.ClusterServiceBrokerAuthInfo) *v1beta1.ClusterServiceBroker {
		b := &v1beta1.ClusterServiceBroker{}
		b.Spec.URL = "https://broker.example"
		b.Spec.AuthInfo = a
		return b
	}
	basic := func(r *v1beta1.ObjectReference) *v1beta1.ClusterBasicAuthConfig {
		return &v1beta1.ClusterBasicAuthConfig{SecretRef: r}
	}
	bearer := func(r *v1beta1.ObjectReference) *v1beta1.ClusterBearerTokenAuthConfig {
		return &v1beta1.ClusterBearerTokenAuthConfig{SecretRef: r}
	}
	// A team's broker names a Secret of its own namespace.
	nsBroker := func(a *v1beta1.ServiceBrokerAuthInfo) *v1beta1.ServiceBroker {
		b := &v1beta1.ServiceBroker{}
		b.Namespace, b.Spec.URL, b.Spec.AuthInfo = "team", "https://broker.example", a
		return b
	}
	local := &v1beta1.LocalObjectReference{Name: "creds"}
	binding := func(secret string) *v1beta1.ServiceBinding {
		b := &v1beta1.ServiceBinding{}
		b.Spec.InstanceRef.Name, b.Spec.SecretName = "db", secret
		return b
	}
	tests := []struct {
		name       string
		standalone bool           // no cluster to hold Secrets
		old, obj   runtime.Object // old nil: a create
		want       []string       // "type field", in order
	}{
		{name: "broker without credentials", obj: broker(nil)},
		{name: "basic in a Secret", obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Basic: basic(ref)})},
		{name: "bearer in a Secret", obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Bearer: bearer(ref)})},
		{name: "basic without its Secret", obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Basic: basic(nil)}),
			want: []string{"FieldValueRequired spec.authInfo.basic.secretRef"}},
		{name: "every problem at once", obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Basic: basic(nil), Bearer: bearer(nil)}),
			want: []string{"FieldValueInvalid spec.authInfo", "FieldValueRequired spec.authInfo.basic.secretRef", "FieldValueRequired spec.authInfo.bearer.secretRef"}},
		{name: "standalone: no credentials through this API", standalone: true, obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Basic: basic(ref)}),
			want: []string{"FieldValueForbidden spec.authInfo"}},
		{name: "standalone: an unchanged authInfo is kept", standalone: true,
			old: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Basic: basic(ref)}), obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Basic: basic(ref)})},
		{name: "update adds a bad authInfo", old: broker(nil), obj: broker(&v1beta1.ClusterServiceBrokerAuthInfo{Bearer: bearer(nil)}),
			want: []string{"FieldValueRequired spec.authInfo.bearer.secretRef"}},
		{name: "ServiceBroker: basic in a Secret", obj: nsBroker(&v1beta1.ServiceBrokerAuthInfo{Basic: &v1beta1.BasicAuthConfig{SecretRef: local}})},
		{name: "ServiceBroker: every problem at once",
			obj:  nsBroker(&v1beta1.ServiceBrokerAuthInfo{Basic: &v1beta1.BasicAuthConfig{}, Bearer: &v1beta1.BearerTokenAuthConfig{}}),
			want: []string{"FieldValueInvalid spec.authInfo", "FieldValueRequired spec.authInfo.basic.secretRef", "FieldValueRequired spec.authInfo.bearer.secretRef"}},
		{name: "ServiceBroker: standalone", standalone: true, obj: nsBroker(&v1beta1.ServiceBrokerAuthInfo{Bearer: &v1beta1.BearerTokenAuthConfig{SecretRef: local}}),
			want: []string{"FieldValueForbidden spec.authInfo"}},
		{name: "ServiceBroker: standalone, unchanged", standalone: true,
			old: nsBroker(&v1beta1.ServiceBrokerAuthInfo{Bearer: &v1beta1.BearerTokenAuthConfig{SecretRef: local}}),
			obj: nsBroker(&v1beta1.ServiceBrokerAuthInfo{Bearer: &v1beta1.BearerTokenAuthConfig{SecretRef: local}})},
		{name: "ServiceBroker: update drops the Secret", old: nsBroker(&v1beta1.ServiceBrokerAuthInfo{Bearer: &v1beta1.BearerTokenAuthConfig{SecretRef: local}}),
			obj:  nsBroker(&v1beta1.ServiceBrokerAuthInfo{Bearer: &v1beta1.BearerTokenAuthConfig{}}),
			want: []string{"FieldValueRequired spec.authInfo.bearer.secretRef"}},
		{name: "binding created", obj: binding("app")},
		{name: "binding metadata changed", old: binding("app"), obj: binding("app")},
		{name: "binding spec changed", old: binding("app"), obj: binding("other"),
			want: []string{"FieldValueForbidden spec"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &strategy{secretRefs: !tc.standalone}
			var errs field.ErrorList
			if tc.old == nil {
				errs = s.Validate(context.Background(), tc.obj)
			} else {
				errs = s.ValidateUpdate(context.Background(), tc.obj, tc.old)
			}
			var got []string
			for _, e := range errs {
				got = append(got, string(e.Type)+" "+e.Field)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors %q, want %q (%v)", got, tc.want, errs)
			}
		})
	}
}
