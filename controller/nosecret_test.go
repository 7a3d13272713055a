package controller_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// TestNoSecret: a binding annotated bindery.dev/no-secret is bound and
// Ready with its credentials stored, but no Secret and no status.binding;
// annotating a binding that has a Secret removes the Secret and clears
// status.binding, and removing the annotation brings both back.
func TestNoSecret(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	kube := cluster.Client(t)
	e := setup(t, func(o *engineOptions) { o.kube = kube })
	e.registerBindery()
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := e.createInstance("db", "postgresql", "small", nil)
	e.waitInstance(in.ID, "Ready", instanceReady)

	b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}}}
	b.Name, b.Namespace = "quiet", "test"
	b.Annotations = map[string]string{catalog.NoSecretAnnotation: "true"}
	b, err := e.store.CreateBinding(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	b = e.waitBinding(b.ID, "Ready", bindingReady)
	if b.Status.Binding != nil {
		t.Errorf("status.binding = %+v for a binding without a Secret", b.Status.Binding)
	}
	if creds, err := e.store.Credentials(ctx, b.ID); err != nil || creds["password"] == nil {
		t.Errorf("credentials stored: %v, %v", len(creds), err)
	}
	// A binding with a Secret, for comparison, then annotated.
	loud := e.waitBinding(e.createBinding("loud", "db").ID, "Ready", bindingReady)
	waitSecret(t, kube, "test", "loud", func(*corev1.Secret) bool { return true })
	if _, err := kube.CoreV1().Secrets("test").Get(ctx, "quiet", metav1.GetOptions{}); err == nil {
		t.Error("the binding that asks for no Secret has one")
	}
	annotate := func(v string) {
		t.Helper()
		cur, err := e.store.GetBinding(ctx, loud.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.UpdateBindingMeta(ctx, loud.ID, cur.ResourceVersion, func(m *catalog.Meta) error {
			if v == "" {
				delete(m.Annotations, catalog.NoSecretAnnotation)
			} else {
				m.Annotations = map[string]string{catalog.NoSecretAnnotation: v}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	annotate("true")
	waitNoSecret(t, kube, "test", "loud")
	e.waitBinding(loud.ID, "status.binding cleared", func(b *catalog.Binding) bool { return b.Status.Binding == nil })
	annotate("")
	waitSecret(t, kube, "test", "loud", func(*corev1.Secret) bool { return true })
	e.waitBinding(loud.ID, "status.binding back", func(b *catalog.Binding) bool { return b.Status.Binding != nil && b.Status.Binding.Name == "loud" })
}
