package servicebinding_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	sbv1beta1 "github.com/bindery-dev/bindery/apis/servicebinding/v1beta1"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

func deployment(ns, name string, lbls map[string]string, containers ...string) *appsv1.Deployment {
	one := int32(1)
	sel := map[string]string{"deployment": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}},
		},
	}
	for _, c := range containers {
		d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	return d
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       "servicebinding.io/postgresql",
		StringData: map[string]string{"type": "postgresql", "provider": "bindery", "host": "db.example", "port": "5432"}}
}

func binding(ns, name string, svc sbv1.ServiceBindingServiceReference, workload sbv1.ServiceBindingWorkloadReference) *sbv1.ServiceBinding {
	return &sbv1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sbv1.ServiceBindingSpec{Service: svc, Workload: workload}}
}

func secretRef(name string) sbv1.ServiceBindingServiceReference {
	return sbv1.ServiceBindingServiceReference{APIVersion: "v1", Kind: "Secret", Name: name}
}

func deploymentRef(name string) sbv1.ServiceBindingWorkloadReference {
	return sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

func create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitReady waits for the binding's Ready condition to have status and,
// when reason is not empty, that reason; it returns the binding.
func waitReady(t *testing.T, c client.Client, sb *sbv1.ServiceBinding, status metav1.ConditionStatus, reason string) *sbv1.ServiceBinding {
	t.Helper()
	var got sbv1.ServiceBinding
	eventually(t, "servicebinding "+sb.Name+" Ready="+string(status), func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), &got); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, sbv1.ConditionReady)
		if cond == nil || cond.Status != status || (reason != "" && cond.Reason != reason) || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	return &got
}

// projected checks that spec carries the binding's volume with secret, the
// mount at root/name in the named containers only, and SERVICE_BINDING_ROOT.
func projected(spec *corev1.PodSpec, uid, secretName, root, name string, containers ...string) error {
	vol := servicebinding.VolumeName(k8stypes.UID(uid))
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vol })
	if i < 0 {
		return fmt.Errorf("no volume %s in %v", vol, spec.Volumes)
	}
	if s := spec.Volumes[i].Projected.Sources[0].Secret.Name; s != secretName {
		return fmt.Errorf("volume projects Secret %q, want %q", s, secretName)
	}
	for _, c := range spec.Containers {
		m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == vol })
		want := len(containers) == 0 || slices.Contains(containers, c.Name)
		if !want {
			if m >= 0 {
				return fmt.Errorf("container %s is bound but not selected", c.Name)
			}
			continue
		}
		if m < 0 || c.VolumeMounts[m].MountPath != root+"/"+name || !c.VolumeMounts[m].ReadOnly {
			return fmt.Errorf("container %s mounts %v", c.Name, c.VolumeMounts)
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SERVICE_BINDING_ROOT" && e.Value == root }) {
			return fmt.Errorf("container %s env %v lacks SERVICE_BINDING_ROOT=%s", c.Name, c.Env, root)
		}
	}
	return nil
}

func podsOf(ctx context.Context, c client.Client, ns, deploy string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(map[string]string{"deployment": deploy})}); err != nil {
		return nil, err
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("no Pods of %s yet", deploy)
	}
	return pods.Items, nil
}

// TestWorkloadProjection runs the specification's Workload Projection and
// Service Binding scenarios against the real control plane.
func TestWorkloadProjection(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "prod-db"))

	// A binding applied before its Deployment: the Deployment, its
	// ReplicaSet and its Pods are projected at admission.
	early := binding(ns, "account-service", secretRef("prod-db"), deploymentRef("online-banking"))
	early.Spec.Env = []sbv1.EnvMapping{{Name: "ACCOUNT_SERVICE_HOST", Key: "host"}}
	create(t, c, early)
	early = waitReady(t, c, early, metav1.ConditionFalse, servicebinding.ReasonWorkloadMissing)
	if early.Status.Binding == nil || early.Status.Binding.Name != "prod-db" {
		t.Errorf("status.binding = %+v, want prod-db (Direct Secret Reference)", early.Status.Binding)
	}
	d := deployment(ns, "online-banking", nil, "app")
	create(t, c, d)
	waitReady(t, c, early, metav1.ConditionTrue, "Projected")
	if err := projected(&d.Spec.Template.Spec, string(early.UID), "prod-db", "/bindings", "account-service"); err != nil {
		t.Errorf("Deployment as created: %v", err)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Env, func(e corev1.EnvVar) bool {
		return e.Name == "ACCOUNT_SERVICE_HOST" && e.ValueFrom.SecretKeyRef.Name == "prod-db" && e.ValueFrom.SecretKeyRef.Key == "host"
	}) {
		t.Errorf("env %v lacks ACCOUNT_SERVICE_HOST", d.Spec.Template.Spec.Containers[0].Env)
	}
	eventually(t, "Pods of online-banking projected", func(ctx context.Context) error {
		pods, err := podsOf(ctx, c, ns, "online-banking")
		if err != nil {
			return err
		}
		return projected(&pods[0].Spec, string(early.UID), "prod-db", "/bindings", "account-service")
	})

	// A binding applied to existing Deployments: by label selector, with
	// SERVICE_BINDING_ROOT already set, a containers filter and type and
	// provider overrides.
	front := deployment(ns, "frontend", map[string]string{"app.kubernetes.io/part-of": "online-banking", "app.kubernetes.io/component": "frontend"}, "web", "sidecar")
	front.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SERVICE_BINDING_ROOT", Value: "/var/bindings"}}
	other := deployment(ns, "batch", map[string]string{"app.kubernetes.io/part-of": "online-banking"}, "worker")
	create(t, c, front, other)
	before := front.DeepCopy()
	sel := binding(ns, "frontend-to-account", secretRef("prod-db"), sbv1.ServiceBindingWorkloadReference{
		APIVersion: "apps/v1", Kind: "Deployment", Containers: []string{"web"},
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "online-banking", "app.kubernetes.io/component": "frontend"}},
	})
	sel.Spec.Name = "account"
	sel.Spec.Type = "mysql"
	sel.Spec.Provider = "example"
	create(t, c, sel)
	sel = waitReady(t, c, sel, metav1.ConditionTrue, "Projected")
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(front), &got); err != nil {
		t.Fatal(err)
	}
	if err := projected(&got.Spec.Template.Spec, string(sel.UID), "prod-db", "/var/bindings", "account", "web"); err != nil {
		t.Errorf("frontend: %v", err)
	}
	if got.Spec.Template.Annotations["type.servicebinding.bindery.dev/"+string(sel.UID)] != "mysql" ||
		got.Spec.Template.Annotations["provider.servicebinding.bindery.dev/"+string(sel.UID)] != "example" {
		t.Errorf("type and provider overrides missing: %v", got.Spec.Template.Annotations)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(other), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("Deployment batch does not match the selector but got %v", got.Spec.Template.Spec.Volumes)
	}

	// Unbinding removes exactly what was projected.
	if err := c.Delete(ctx, sel); err != nil {
		t.Fatal(err)
	}
	eventually(t, "frontend unprojected", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(front), &got); err != nil {
			return err
		}
		if !equalPodTemplates(&before.Spec.Template, &got.Spec.Template) {
			return fmt.Errorf("template %+v, want %+v", got.Spec.Template, before.Spec.Template)
		}
		return nil
	})

	// A Pod created before its binding cannot change: the binding says so.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lonely"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	create(t, c, pod)
	podSB := binding(ns, "to-pod", secretRef("prod-db"), sbv1.ServiceBindingWorkloadReference{APIVersion: "v1", Kind: "Pod", Name: "lonely"})
	create(t, c, podSB)
	podSB = waitReady(t, c, podSB, metav1.ConditionFalse, servicebinding.ReasonWorkloadImmutable)
	if msg := meta.FindStatusCondition(podSB.Status.Conditions, sbv1.ConditionReady).Message; !strings.Contains(msg, "Pod lonely") {
		t.Errorf("Ready message %q does not name the Pod", msg)
	}

	// A missing service is reported, not retried in a hot loop.
	missing := binding(ns, "missing", secretRef("nowhere"), deploymentRef("online-banking"))
	create(t, c, missing)
	missing = waitReady(t, c, missing, metav1.ConditionFalse, servicebinding.ReasonServiceMissing)
	if cond := meta.FindStatusCondition(missing.Status.Conditions, sbv1.ConditionServiceAvailable); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("ServiceAvailable = %+v", cond)
	}

	// servicebinding.io/v1beta1 is served, with the same schema.
	old := &sbv1beta1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-1-0"},
		Spec: sbv1beta1.ServiceBindingSpec{
			Service:  sbv1beta1.ServiceBindingServiceReference{APIVersion: "v1", Kind: "Secret", Name: "prod-db"},
			Workload: sbv1beta1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "batch"}}}
	create(t, c, old)
	waitReady(t, c, &sbv1.ServiceBinding{ObjectMeta: old.ObjectMeta}, metav1.ConditionTrue, "Projected")

	// The namespace is labelled for the webhook configuration's selector.
	var n corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[servicebinding.NamespaceLabel] != "true" {
		t.Errorf("namespace labels %v lack %s", n.Labels, servicebinding.NamespaceLabel)
	}
}

// TestProvisionedServiceRotation binds a Provisioned Service of a kind of
// its own (a CRD whose status.binding.name names the Secret): a new Secret
// name there is a rotation, and the Deployment follows.
func TestProvisionedServiceRotation(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	createAccountServiceCRD(t, c)
	create(t, c, secret(ns, "db-1"), secret(ns, "db-2"))
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "com.example/v1alpha1", "kind": "AccountService",
		"metadata": map[string]any{"namespace": ns, "name": "prod-account-service"},
	}}
	create(t, c, svc)
	setBinding := func(name string) {
		t.Helper()
		svc.Object["status"] = map[string]any{"binding": map[string]any{"name": name}}
		if err := c.Status().Update(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	d := deployment(ns, "online-banking", nil, "app")
	create(t, c, d)
	sb := binding(ns, "account-service", sbv1.ServiceBindingServiceReference{APIVersion: "com.example/v1alpha1", Kind: "AccountService", Name: "prod-account-service"}, deploymentRef("online-banking"))
	create(t, c, sb)
	waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonServiceMissing)
	// A Service Catalog binding that asks for no Secret says so.
	svc.SetAnnotations(map[string]string{"bindery.dev/no-secret": "true"})
	if err := c.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reason names the CSI driver", func(ctx context.Context) error {
		var got sbv1.ServiceBinding
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), &got); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, sbv1.ConditionReady); cond == nil || !strings.Contains(cond.Message, "csi.bindery.dev") {
			return fmt.Errorf("Ready: %+v", cond)
		}
		return nil
	})

	setBinding("db-1")
	sb = waitReady(t, c, sb, metav1.ConditionTrue, "Projected")
	for _, want := range []string{"db-1", "db-2"} {
		if want == "db-2" {
			setBinding("db-2")
		}
		eventually(t, "Deployment projects "+want, func(ctx context.Context) error {
			var got appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
				return err
			}
			return projected(&got.Spec.Template.Spec, string(sb.UID), want, "/bindings", "account-service")
		})
	}
}

func createAccountServiceCRD(t *testing.T, c client.Client) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetUnstructuredContent(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "accountservices.com.example",
			"labels": map[string]any{"servicebinding.io/provisioned-service": "true"}},
		"spec": map[string]any{
			"group": "com.example", "scope": "Namespaced",
			"names": map[string]any{"plural": "accountservices", "singular": "accountservice", "kind": "AccountService", "listKind": "AccountServiceList"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	})
	create(t, c, u)
	eventually(t, "AccountService served", func(ctx context.Context) error {
		var l unstructured.UnstructuredList
		l.SetAPIVersion("com.example/v1alpha1")
		l.SetKind("AccountServiceList")
		return c.List(ctx, &l)
	})
}

// TestWebhookDown: with failurePolicy Ignore, a Deployment applied while
// the webhook is down is admitted unprojected, and the controller projects
// it once it is back.
func TestWebhookDown(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "prod-db"))
	sb := binding(ns, "account-service", secretRef("prod-db"), deploymentRef("online-banking"))
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonWorkloadMissing)

	b.stop()
	d := deployment(ns, "online-banking", nil, "app")
	create(t, c, d)
	if len(d.Spec.Template.Spec.Volumes) != 0 {
		t.Fatalf("Deployment projected while the webhook is down: %v", d.Spec.Template.Spec.Volumes)
	}
	b.start()
	eventually(t, "Deployment repaired", func(ctx context.Context) error {
		var got appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			return err
		}
		return projected(&got.Spec.Template.Spec, string(sb.UID), "prod-db", "/bindings", "account-service")
	})
}

// TestWebhookDownFail: with failurePolicy Fail, the same Deployment is
// refused while the webhook is down.
func TestWebhookDownFail(t *testing.T) {
	b := setup(t, admissionregistrationv1.Fail)
	b.stop()
	err := b.c.Create(t.Context(), deployment(b.ns, "online-banking", nil, "app"))
	if err == nil || !strings.Contains(err.Error(), "projection.servicebinding.bindery.dev") {
		t.Fatalf("create with the webhook down and failurePolicy Fail = %v, want a refusal naming the webhook", err)
	}
}

// TestUserMountAtBindingPath: a workload that mounts a volume of its own
// at $SERVICE_BINDING_ROOT/<name> is admitted and left without the
// binding's mount, and the binding says so (Ready False, naming the
// container and the volume) until the user moves the mount away. The
// projection used to add a second mount at the same path: the API server
// refused such a Deployment at admission, a binding that cannot be
// projected being meant as a warning only, and refused the controller's
// every update of an existing one, which it retried for ever with the
// binding's status never saying why.
func TestUserMountAtBindingPath(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "prod-db"))
	sb := binding(ns, "db", secretRef("prod-db"), deploymentRef("web"))
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonWorkloadMissing)

	d := deployment(ns, "web", nil, "app", "worker")
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "own", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "own", MountPath: "/bindings/db"}}
	if err := c.Create(ctx, d); err != nil {
		t.Fatalf("a Deployment mounting its own volume at the binding's directory was refused: %v", err)
	}
	if err := projected(&d.Spec.Template.Spec, string(sb.UID), "prod-db", "/bindings", "db", "worker"); err != nil {
		t.Errorf("Deployment as created: %v", err)
	}
	sb = waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonProjectionFailed)
	if msg := meta.FindStatusCondition(sb.Status.Conditions, sbv1.ConditionReady).Message; !strings.Contains(msg, `container "app" already mounts volume "own" at /bindings/db`) {
		t.Errorf("Ready message %q does not say which mount is in the way", msg)
	}

	// The user moves the mount away: the binding is projected and Ready.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].VolumeMounts[0].MountPath = "/data"
		return c.Update(ctx, d)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, sb, metav1.ConditionTrue, servicebinding.ReasonProjected)
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	if err := projected(&got.Spec.Template.Spec, string(sb.UID), "prod-db", "/bindings", "db"); err != nil {
		t.Errorf("after the mount moved: %v", err)
	}
}

// TestServiceChangedToMissing: a binding re-pointed to a service that has
// no Secret (yet) no longer names the Secret of the service it left, and
// a workload it selects is not given that Secret. The controller used to
// keep status.binding from before, and the webhook, trusting it, went on
// projecting the old service's credentials into new workloads.
func TestServiceChangedToMissing(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "old-db"))
	sb := binding(ns, "db", secretRef("old-db"), sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment",
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bind": "yes"}}})
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionTrue, servicebinding.ReasonProjected)
	sb.Spec.Service = secretRef("new-db")
	if err := c.Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
	sb = waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonServiceMissing)
	if sb.Status.Binding != nil {
		t.Errorf("status.binding = %+v with the service missing, want none", sb.Status.Binding)
	}
	d := deployment(ns, "web", map[string]string{"bind": "yes"}, "app")
	create(t, c, d)
	if len(d.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("Deployment created with %+v, though the binding's service has no Secret", d.Spec.Template.Spec.Volumes)
	}
}

// TestMappingChange follows the specification's Workload Resource Mapping
// runtime behaviour: after a ClusterWorkloadResourceMapping changes, the
// binding is removed with the mapping it was projected with and projected
// again with the new one, and unbinding removes it with the mapping of
// its projection. Projection and removal used to read the workload with
// the mapping as it was at the time: the mounts in containers the new
// mapping no longer covered stayed, unbinding removed the volume but not
// them, the API server refused the update (a mount of no volume) for
// ever, and the binding could not be deleted.
func TestMappingChange(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "prod-db"))
	cwrm := &sbv1.ClusterWorkloadResourceMapping{ObjectMeta: metav1.ObjectMeta{Name: "deployments.apps"},
		Spec: sbv1.ClusterWorkloadResourceMappingSpec{Versions: []sbv1.ClusterWorkloadResourceMappingTemplate{{Version: "*",
			Containers: []sbv1.ClusterWorkloadResourceMappingContainer{
				{Path: ".spec.template.spec.initContainers[*]", Name: ".name"},
				{Path: ".spec.template.spec.containers[*]", Name: ".name"},
			}}}}}
	d := deployment(ns, "web", nil, "app")
	d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	create(t, c, cwrm, d)
	before := d.DeepCopy()
	sb := binding(ns, "db", secretRef("prod-db"), deploymentRef("web"))
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionTrue, servicebinding.ReasonProjected)
	mounts := func(cs []corev1.Container) []string {
		var out []string
		for _, ctr := range cs {
			if slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == servicebinding.VolumeName(sb.UID) }) {
				out = append(out, ctr.Name)
			}
		}
		return out
	}
	bound := func(ctx context.Context, want ...string) error {
		var got appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			return err
		}
		spec := got.Spec.Template.Spec
		if m := mounts(append(spec.InitContainers, spec.Containers...)); !slices.Equal(m, want) {
			return fmt.Errorf("containers mounting the binding: %v, want %v", m, want)
		}
		return nil
	}
	eventually(t, "both arrays bound", func(ctx context.Context) error { return bound(ctx, "init", "app") })

	// The mapping now binds the init containers only.
	if err := c.Get(ctx, client.ObjectKeyFromObject(cwrm), cwrm); err != nil {
		t.Fatal(err)
	}
	cwrm.Spec.Versions[0].Containers = cwrm.Spec.Versions[0].Containers[:1]
	if err := c.Update(ctx, cwrm); err != nil {
		t.Fatal(err)
	}
	eventually(t, "projected again with the new mapping", func(ctx context.Context) error { return bound(ctx, "init") })

	if err := c.Delete(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "binding deleted", func(ctx context.Context) error {
		var got sbv1.ServiceBinding
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), &got); err == nil {
			return fmt.Errorf("still there, finalizers %v, status %+v", got.Finalizers, got.Status)
		}
		return nil
	})
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	if !equalPodTemplates(&before.Spec.Template, &got.Spec.Template) {
		t.Errorf("unbound Deployment's template %+v, want %+v", got.Spec.Template, before.Spec.Template)
	}
	for k := range got.Annotations {
		if strings.Contains(k, string(sb.UID)) {
			t.Errorf("unbound Deployment keeps annotation %s", k)
		}
	}
}

func equalPodTemplates(a, b *corev1.PodTemplateSpec) bool { return equality.Semantic.DeepEqual(a, b) }

// TestEgressAnnotation: Pods into which a Bindery binding is projected
// carry its endpoints as bindery.dev/egress, and a Pod's creator cannot
// grant itself endpoints by writing the annotation, or the projection's
// record without the projection. The Service Catalog
// ServiceBinding here is served by a CRD of the same group, kind and JSON
// as the aggregated API, so that the test needs no network namespace.
func TestEgressAnnotation(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	c, ns := b.c, b.ns
	catalogBinding(t, c, ns, []any{map[string]any{"host": "10.0.0.5", "ports": []any{"5432", "6000-6010"}, "protocol": "tcp"}})
	sb := binding(ns, "db", sbv1.ServiceBindingServiceReference{APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: "db"}, deploymentRef("web"))
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionFalse, servicebinding.ReasonWorkloadMissing)
	if sb.Status.Binding == nil || sb.Status.Binding.Name != "db-creds" {
		t.Fatalf("status.binding = %+v", sb.Status.Binding)
	}
	create(t, c, deployment(ns, "web", nil, "app"))
	const want = `[{"host":"10.0.0.5","ports":["5432","6000-6010"],"protocol":"tcp"}]`
	eventually(t, "Pods of web carry the egress annotation", func(ctx context.Context) error {
		pods, err := podsOf(ctx, c, ns, "web")
		if err != nil {
			return err
		}
		if got := pods[0].Annotations[servicebinding.EgressAnnotation]; got != want {
			return fmt.Errorf("egress %q, want %q", got, want)
		}
		return projected(&pods[0].Spec, string(sb.UID), "db-creds", "/bindings", "db")
	})

	forged := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged",
		Annotations: map[string]string{servicebinding.EgressAnnotation: `[{"host":"0.0.0.0","ports":["1-65535"],"protocol":"all"}]`}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	create(t, c, forged)
	if v, ok := forged.Annotations[servicebinding.EgressAnnotation]; ok {
		t.Errorf("a Pod with no binding kept the egress annotation its creator wrote: %s", v)
	}
	// Nor by writing the record of a projection it does not carry.
	record := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "record",
		Annotations: map[string]string{"servicebinding.bindery.dev/" + string(sb.UID): "{}"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	create(t, c, record)
	if v, ok := record.Annotations[servicebinding.EgressAnnotation]; ok {
		t.Errorf("a Pod that wrote a binding's record without its volume was granted %s", v)
	}
}

// catalogBinding makes the stand-in CRD and a Service Catalog binding db
// whose status names the Secret db-creds (which it creates) and these
// endpoints.
func catalogBinding(t testing.TB, c client.Client, ns string, endpoints []any) {
	t.Helper()
	createCatalogBindingCRD(t, c)
	create(t, c, secret(ns, "db-creds"))
	scb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "servicecatalog.k8s.io/v1beta1", "kind": "ServiceBinding",
		"metadata": map[string]any{"namespace": ns, "name": "db"},
	}}
	create(t, c, scb)
	scb.Object["status"] = map[string]any{"binding": map[string]any{"name": "db-creds"}, "endpoints": endpoints}
	if err := c.Status().Update(t.Context(), scb); err != nil {
		t.Fatal(err)
	}
}

func createCatalogBindingCRD(t testing.TB, c client.Client) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetUnstructuredContent(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "servicebindings.servicecatalog.k8s.io",
			"annotations": map[string]any{"api-approved.kubernetes.io": "unapproved, test stand-in for the aggregated API"}},
		"spec": map[string]any{
			"group": "servicecatalog.k8s.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "servicebindings", "singular": "servicebinding", "kind": "ServiceBinding", "listKind": "ServiceBindingList"},
			"versions": []any{map[string]any{"name": "v1beta1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	})
	create(t, c, u)
	eventually(t, "servicecatalog.k8s.io ServiceBinding served", func(ctx context.Context) error {
		var l unstructured.UnstructuredList
		l.SetAPIVersion("servicecatalog.k8s.io/v1beta1")
		l.SetKind("ServiceBindingList")
		return c.List(ctx, &l)
	})
}

// TestLeastPrivilege runs the webhook and controller with only the rights
// deploy/servicebinding/rbac.yaml grants (the aggregated ClusterRole, filled
// by kube-controller-manager): a Direct Secret Reference resolved from
// metadata, projection into an existing Deployment, and unbinding.
func TestLeastPrivilege(t *testing.T) {
	b := setupAs(t, admissionregistrationv1.Ignore, webhookUser)
	ctx := t.Context()
	c, ns := b.c, b.ns
	create(t, c, secret(ns, "prod-db"))
	d := deployment(ns, "online-banking", nil, "app")
	create(t, c, d)
	before := d.DeepCopy()
	sb := binding(ns, "account-service", secretRef("prod-db"), deploymentRef("online-banking"))
	create(t, c, sb)
	sb = waitReady(t, c, sb, metav1.ConditionTrue, "Projected")
	var got appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatal(err)
	}
	if err := projected(&got.Spec.Template.Spec, string(sb.UID), "prod-db", "/bindings", "account-service"); err != nil {
		t.Error(err)
	}
	if err := c.Delete(ctx, sb); err != nil {
		t.Fatal(err)
	}
	eventually(t, "unprojected", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			return err
		}
		if !equalPodTemplates(&before.Spec.Template, &got.Spec.Template) {
			return fmt.Errorf("template %+v", got.Spec.Template.Spec.Volumes)
		}
		return nil
	})
}

// TestEgressGuard: the egress annotation is a network grant, so no Pod's
// creator may set it and nobody may change it (through the Pod or its
// status subresource), in any namespace, with the
// webhook configurations as deploy/servicebinding has them (the projection
// webhook only in bound namespaces). A forged annotation is removed at
// creation, a change is refused, and while the webhook is down a Pod that
// claims the annotation is refused while others are admitted.
func TestEgressGuard(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	c, ctx := b.c, t.Context()
	// The projection webhook's namespace selector, as deployed.
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: "bindery-servicebinding"}, &mwc); err != nil {
		t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		if mwc.Webhooks[i].Name == projectionWebhook {
			mwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{servicebinding.NamespaceLabel: "true"}}
		}
	}
	if err := c.Update(ctx, &mwc); err != nil {
		t.Fatal(err)
	}
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}})
	const forged = `[{"host":"0.0.0.0","ports":["1-65535"],"protocol":"all"}]`
	pod := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	}
	// The API server picks the changed configuration up within a moment.
	n := 0
	eventually(t, "a forged annotation removed in a namespace without bindings", func(ctx context.Context) error {
		n++
		p := pod(fmt.Sprintf("forged-%d", n), map[string]string{servicebinding.EgressAnnotation: forged})
		if err := c.Create(ctx, p); err != nil {
			return err
		}
		if v, ok := p.Annotations[servicebinding.EgressAnnotation]; ok {
			return fmt.Errorf("the Pod kept %s=%s", servicebinding.EgressAnnotation, v)
		}
		return nil
	})

	plain := pod("plain", nil)
	create(t, c, plain)
	patched := plain.DeepCopy()
	patched.Annotations = map[string]string{servicebinding.EgressAnnotation: forged}
	err := c.Patch(ctx, patched, client.MergeFrom(plain))
	if err == nil || !strings.Contains(err.Error(), "cannot be changed") {
		t.Errorf("adding %s to a running Pod: %v, want a refusal", servicebinding.EgressAnnotation, err)
	}
	// The status subresource writes a Pod's metadata too.
	err = c.Status().Patch(ctx, patched, client.MergeFrom(plain))
	if err == nil || !strings.Contains(err.Error(), "cannot be changed") {
		t.Errorf("adding %s through pods/status: %v, want a refusal", servicebinding.EgressAnnotation, err)
	}
	relabelled := plain.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "web"}
	if err := c.Patch(ctx, relabelled, client.MergeFrom(plain)); err != nil {
		t.Errorf("another change of the Pod: %v", err)
	}

	b.stop()
	err = c.Create(ctx, pod("forged-down", map[string]string{servicebinding.EgressAnnotation: forged}))
	if err == nil || !strings.Contains(err.Error(), egressWebhook) {
		t.Errorf("a forged annotation while the webhook is down: %v, want a refusal naming %s", err, egressWebhook)
	}
	if err := c.Create(ctx, pod("plain-down", nil)); err != nil {
		t.Errorf("a Pod without the annotation while the webhook is down: %v", err)
	}
}

// TestUnreadableEndpointsDenyNoPod: a Service Catalog binding whose
// endpoints cannot be read (here malformed, as the stand-in CRD lets them
// be; in a cluster, an aggregated API that does not answer) grants the
// Pod no network access, with a warning, and does not refuse the Pod: the
// webhook fails open on admission.
func TestUnreadableEndpointsDenyNoPod(t *testing.T) {
	b := setup(t, admissionregistrationv1.Ignore)
	ctx := t.Context()
	c, ns := b.c, b.ns
	catalogBinding(t, c, ns, []any{map[string]any{"host": "10.0.0.5", "ports": []any{5432}}})
	sb := binding(ns, "db", sbv1.ServiceBindingServiceReference{APIVersion: "servicecatalog.k8s.io/v1beta1", Kind: "ServiceBinding", Name: "db"},
		sbv1.ServiceBindingWorkloadReference{APIVersion: "v1", Kind: "Pod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	create(t, c, sb)
	waitReady(t, c, sb, metav1.ConditionTrue, "Projected")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatalf("the Pod was refused: %v", err)
	}
	if v, ok := p.Annotations[servicebinding.EgressAnnotation]; ok {
		t.Errorf("granted %s from endpoints that could not be read", v)
	}
	if err := projected(&p.Spec, string(sb.UID), "db-creds", "/bindings", "db"); err != nil {
		t.Errorf("the Secret is not projected: %v", err)
	}
}
