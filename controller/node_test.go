package controller_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/internal/kubetest"
)

// TestBindingReadInPod follows a binding's credentials all the way into a
// container: the engine writes the Secret of a binding to Bindery's own
// PostgreSQL broker, a Pod on a real node mounts it, and what `kubectl exec
// cat` prints inside is what the Secret holds.
func TestBindingReadInPod(t *testing.T) {
	cluster := kubetest.Start(t, kubetest.WithNode())
	kube := cluster.Client(t)
	e := setup(t, func(o *engineOptions) { o.kube = kube })
	e.registerBindery()
	ctx := context.Background()
	ns := "test"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in := e.createInstance("db", "postgresql", "small", nil)
	e.waitInstance(in.ID, "Ready", instanceReady)
	b := e.createBinding("app", "db")
	e.waitBinding(b.ID, "Ready", bindingReady)
	s, err := kube.CoreV1().Secrets(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the binding's Secret: %v", err)
	}

	pod := kubetest.BusyboxPod("app", "exec sleep 3600")
	pod.Namespace = ns
	pod.Spec.Volumes = []corev1.Volume{{Name: "binding", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "binding", MountPath: "/bindings/app", ReadOnly: true}}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitPodRunning(t, kube, ns, "app")
	for _, key := range []string{"type", "provider", "uri"} {
		out, err := cluster.Kubectl(t, "exec", "--namespace", ns, "app", "--", "cat", "/bindings/app/"+key)
		if err != nil {
			t.Fatal(err)
		}
		if out != string(s.Data[key]) || out == "" {
			// The value is a credential: say only that it differs.
			t.Errorf("/bindings/app/%s inside the Pod (%d bytes) is not the Secret's %s (%d bytes)", key, len(out), key, len(s.Data[key]))
		}
	}
}
