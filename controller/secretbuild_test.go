package controller_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
)

// TestSecretData: credentials become Secret data, and each kind of
// transform of Service Catalog v1beta1 applies in order.
func TestSecretData(t *testing.T) {
	t.Parallel()
	creds := map[string]any{
		"uri":      "postgres://u:p@db:5432/app",
		"port":     5432,
		"tls":      true,
		"hosts":    []any{"a", "b"},
		"database": "app",
		"nested":   map[string]any{"user": "u"},
	}
	plain := map[string]string{
		"uri": "postgres://u:p@db:5432/app", "port": "5432", "tls": "true", "hosts": `["a","b"]`,
		"database": "app", "nested": `{"user":"u"}`,
	}
	with := func(change func(map[string]string)) map[string]string {
		m := maps.Clone(plain)
		change(m)
		return m
	}
	other := map[string][]byte{"CA": []byte("ca-pem"), "uri": []byte("from-other")}
	from := func(name string) (map[string][]byte, error) {
		if name != "other" {
			return nil, errors.New(`secrets "` + name + `" not found`)
		}
		return other, nil
	}
	tests := []struct {
		name       string
		transforms []catalog.SecretTransform
		from       func(string) (map[string][]byte, error)
		want       map[string]string
		wantErr    string
	}{
		{name: "no transforms: strings as they are, the rest as JSON", want: plain},
		{name: "rename", transforms: []catalog.SecretTransform{{RenameKey: &catalog.RenameKeyTransform{From: "uri", To: "DATABASE_URL"}}},
			want: with(func(m map[string]string) { m["DATABASE_URL"] = m["uri"]; delete(m, "uri") })},
		{name: "rename a missing key does nothing", transforms: []catalog.SecretTransform{{RenameKey: &catalog.RenameKeyTransform{From: "absent", To: "x"}}},
			want: plain},
		{name: "add a string", transforms: []catalog.SecretTransform{{AddKey: &catalog.AddKeyTransform{Key: "MODE", StringValue: "production"}}},
			want: with(func(m map[string]string) { m["MODE"] = "production" })},
		{name: "add bytes", transforms: []catalog.SecretTransform{{AddKey: &catalog.AddKeyTransform{Key: "bin", Value: []byte{0, 1}}}},
			want: with(func(m map[string]string) { m["bin"] = "\x00\x01" })},
		{name: "add by JSONPath", transforms: []catalog.SecretTransform{{AddKey: &catalog.AddKeyTransform{Key: "USER", JSONPathExpression: "{.nested.user}"}}},
			want: with(func(m map[string]string) { m["USER"] = "u" })},
		{name: "bad JSONPath names the field", transforms: []catalog.SecretTransform{{AddKey: &catalog.AddKeyTransform{Key: "x", JSONPathExpression: "{.missing}"}}},
			wantErr: "spec.secretTransforms[0].addKey.jsonPathExpression"},
		{name: "remove", transforms: []catalog.SecretTransform{{RemoveKey: &catalog.RemoveKeyTransform{Key: "tls"}}},
			want: with(func(m map[string]string) { delete(m, "tls") })},
		{name: "add keys from another Secret, which win", transforms: []catalog.SecretTransform{{AddKeysFrom: &catalog.AddKeysFromTransform{SecretRef: &catalog.ObjectRef{Name: "other"}}}},
			from: from, want: with(func(m map[string]string) { m["CA"] = "ca-pem"; m["uri"] = "from-other" })},
		{name: "add keys from a missing Secret", transforms: []catalog.SecretTransform{{AddKeysFrom: &catalog.AddKeysFromTransform{SecretRef: &catalog.ObjectRef{Name: "gone"}}}},
			from: from, wantErr: `spec.secretTransforms[0].addKeysFrom: secrets "gone" not found`},
		{name: "add keys from without a cluster", transforms: []catalog.SecretTransform{{AddKeysFrom: &catalog.AddKeysFromTransform{SecretRef: &catalog.ObjectRef{Name: "other"}}}},
			wantErr: "needs a Kubernetes cluster"},
		{name: "in order: rename, then remove the new name", transforms: []catalog.SecretTransform{
			{RenameKey: &catalog.RenameKeyTransform{From: "uri", To: "URL"}},
			{RemoveKey: &catalog.RemoveKeyTransform{Key: "URL"}},
		}, want: with(func(m map[string]string) { delete(m, "uri") })},
		{name: "in order: JSONPath reads the credentials, not the renamed data", transforms: []catalog.SecretTransform{
			{RenameKey: &catalog.RenameKeyTransform{From: "database", To: "DB"}},
			{AddKey: &catalog.AddKeyTransform{Key: "NAME", JSONPathExpression: "{.database}"}},
		}, want: with(func(m map[string]string) { m["DB"] = "app"; m["NAME"] = "app"; delete(m, "database") })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := controller.SecretData(creds, tc.transforms, tc.from)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			str := make(map[string]string, len(got))
			for k, v := range got {
				str[k] = string(v)
			}
			if !maps.Equal(str, tc.want) {
				t.Errorf("data\n got %v\nwant %v", str, tc.want)
			}
		})
	}
	if _, err := controller.SecretData(map[string]any{"bad": func() {}}, nil, nil); err == nil || !strings.Contains(err.Error(), `credential "bad"`) {
		t.Errorf("a credential that is not JSON: %v", err)
	}
}

// TestBuildSecret: the Secret's name, namespace, servicebinding.io type and
// keys, labels, annotation and controller owner reference.
func TestBuildSecret(t *testing.T) {
	t.Parallel()
	binding := func() *catalog.Binding {
		b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}, SecretName: "app-creds"}}
		b.ID, b.Name, b.Namespace = "6f1c7a52-0000-4000-8000-000000000001", "app", "team"
		return b
	}
	class := func(name string, tags ...string) *catalog.ServiceClass {
		return &catalog.ServiceClass{Spec: catalog.ServiceClassSpec{ExternalName: name, Tags: tags}}
	}
	yes := true
	wantMeta := metav1.ObjectMeta{
		Name: "app-creds", Namespace: "team",
		Labels: map[string]string{
			controller.LabelManagedBy: controller.ManagedBy,
			controller.LabelBindingID: "6f1c7a52-0000-4000-8000-000000000001",
			controller.LabelBinding:   "app",
			controller.LabelInstance:  "db",
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: "app",
			UID: types.UID("6f1c7a52-0000-4000-8000-000000000001"), Controller: &yes, BlockOwnerDeletion: &yes,
		}},
	}
	tests := []struct {
		name         string
		class        *catalog.ServiceClass
		data         map[string]string
		wantType     corev1.SecretType
		wantTypeKey  string
		wantProvider string
	}{
		{name: "well-known tag", class: class("PostgreSQL 16", "sql", "PostgreSQL"), data: map[string]string{"uri": "x"},
			wantType: "servicebinding.io/postgresql", wantTypeKey: "postgresql", wantProvider: "bindery"},
		{name: "first tag when none is well known", class: class("cache", "Memcached", "kv"), data: map[string]string{},
			wantType: "servicebinding.io/memcached", wantTypeKey: "memcached", wantProvider: "bindery"},
		{name: "class name without tags", class: class("Queue"), data: map[string]string{},
			wantType: "servicebinding.io/queue", wantTypeKey: "queue", wantProvider: "bindery"},
		{name: "the broker's own type and provider win", class: class("redis", "redis"), data: map[string]string{"type": "valkey", "provider": "acme"},
			wantType: "servicebinding.io/valkey", wantTypeKey: "valkey", wantProvider: "acme"},
		{name: "empty provider is filled", class: class("redis", "redis"), data: map[string]string{"provider": ""},
			wantType: "servicebinding.io/redis", wantTypeKey: "redis", wantProvider: "bindery"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			given := maps.Clone(data)
			s := controller.BuildSecret(binding(), tc.class, "bindery", data)
			meta := wantMeta
			meta.Annotations = map[string]string{"servicecatalog.k8s.io/class": tc.class.Spec.ExternalName}
			if !equality.Semantic.DeepEqual(s.ObjectMeta, meta) {
				t.Errorf("metadata\n got %+v\nwant %+v", s.ObjectMeta, meta)
			}
			if s.Type != tc.wantType {
				t.Errorf("type %q, want %q", s.Type, tc.wantType)
			}
			if string(s.Data["type"]) != tc.wantTypeKey || string(s.Data["provider"]) != tc.wantProvider {
				t.Errorf("type key %q, provider %q", s.Data["type"], s.Data["provider"])
			}
			for k, v := range tc.data {
				if k != "type" && k != "provider" && string(s.Data[k]) != v {
					t.Errorf("key %s = %q, want %q", k, s.Data[k], v)
				}
			}
			if !maps.EqualFunc(data, given, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Error("BuildSecret changed the data it was given")
			}
		})
	}
}
