package catalog

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestValidateBroker: defaulting fills in the relist settings apart from
// validation, and validation names every bad field by its path.
func TestValidateBroker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		b    Broker
		auth *BrokerAuth
		want []string // "type field"
	}{
		{name: "valid with defaults", b: Broker{Meta: Meta{Name: "b"}, Spec: BrokerSpec{URL: "https://b.example"}}},
		{name: "everything wrong", b: Broker{Meta: Meta{Name: "Bad Name"}, Spec: BrokerSpec{URL: "ftp://x", RelistDuration: "soon", CABundle: "not pem",
			CatalogRestrictions: &CatalogRestrictions{ServicePlan: []string{"spec.colour=blue"}}}},
			auth: &BrokerAuth{Basic: &BasicAuth{Username: "u"}},
			want: []string{
				"FieldValueInvalid name", "FieldValueInvalid spec.url", "FieldValueInvalid spec.relistDuration",
				"FieldValueInvalid spec.caBundle", "FieldValueInvalid spec.catalogRestrictions.servicePlan[0]", "FieldValueRequired auth.basic.password",
			}},
		{name: "secret without namespace", b: Broker{Meta: Meta{Name: "b"}, Spec: BrokerSpec{URL: "http://b", RelistBehavior: RelistManual,
			AuthInfo: &BrokerAuthInfo{Bearer: &BearerAuthInfo{SecretRef: &ObjectRef{Name: "s"}}}}},
			want: []string{"FieldValueRequired spec.authInfo.bearer.secretRef.namespace"}},
		{name: "credentials in the URL", b: Broker{Meta: Meta{Name: "b"}, Spec: BrokerSpec{URL: "https://user:secret@b.example"}},
			want: []string{"FieldValueInvalid spec.url"}},
		{name: "metadata PostgreSQL and kubectl cannot hold", b: Broker{Meta: Meta{Name: "b", Labels: map[string]string{"bad key!": "v"},
			Annotations: map[string]string{"a": "x\x00y"}}, Spec: BrokerSpec{URL: "https://b.example"}},
			want: []string{"FieldValueInvalid labels", "FieldValueInvalid annotations[a]"}},
		{name: "negative relist requests", b: Broker{Meta: Meta{Name: "b"}, Spec: BrokerSpec{URL: "http://b", RelistRequests: -1}},
			want: []string{"FieldValueInvalid spec.relistRequests"}},
		{name: "unknown relist behavior", b: Broker{Meta: Meta{Name: "b"}, Spec: BrokerSpec{URL: "http://b", RelistBehavior: "Sometimes"}},
			want: []string{"FieldValueInvalid spec.relistBehavior"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.b
			defaultBroker(&b)
			errs := validateBroker(&b, tc.auth)
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = string(e.Type) + " " + e.Field
				if strings.Contains(FieldMessage(e), "secret") {
					t.Errorf("%s: the message quotes the value: %s", e.Field, FieldMessage(e))
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("error %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
	b := Broker{Spec: BrokerSpec{URL: "http://b"}}
	defaultBroker(&b)
	if b.Spec.RelistBehavior != RelistDuration || b.Spec.RelistDuration != DefaultRelistDuration.String() {
		t.Errorf("defaults: %q %q", b.Spec.RelistBehavior, b.Spec.RelistDuration)
	}
}

// TestValidationMessage: the catalog's wording of field errors leaves the
// value out, and says why a required field is.
func TestValidationMessage(t *testing.T) {
	t.Parallel()
	err := invalid(field.ErrorList{
		field.Required(field.NewPath("spec", "url"), ""),
		field.Required(field.NewPath("ns"), "a cluster-scoped broker names it"),
		bad(field.NewPath("auth", "bearer", "token"), "must not be secret"),
	})
	want := "spec.url: required; ns: required: a cluster-scoped broker names it; auth.bearer.token: must not be secret"
	if err == nil || err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if invalid(nil) != nil {
		t.Error("no errors make an error")
	}
}
