package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/nodeagent/cni"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// installedByUp are the cluster-scoped objects `bindery up --kubeconfig`
// installs: the webhook configuration and the servicebinding.io CRDs.
var installedByUp = []client.Object{
	&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "bindery-servicebinding"}},
	&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "servicebindings.servicebinding.io"}},
	&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "clusterworkloadresourcemappings.servicebinding.io"}},
}

// leftovers lists what of Bindery's is in the cluster: the objects up
// installs, namespaces labelled for the webhook, and Secrets the engine
// wrote.
func leftovers(t *testing.T, c client.Client, kube kubernetes.Interface) []string {
	t.Helper()
	ctx := t.Context()
	var left []string
	for _, o := range installedByUp {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		switch {
		case err == nil:
			left = append(left, fmt.Sprintf("%T %s", o, o.GetName()))
		case !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
	}
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: servicebinding.NamespaceLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss.Items {
		left = append(left, "namespace label on "+ns.Name)
	}
	secrets, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: controller.LabelManagedBy + "=" + controller.ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		left = append(left, "Secret "+s.Namespace+"/"+s.Name)
	}
	return left
}

// egressPod creates a Pod that carries the egress annotation, which only
// the egress webhook (failurePolicy Fail, every namespace) admits while
// its configuration is installed.
func egressPod(ctx context.Context, kube kubernetes.Interface, ns string) error {
	pod := kubetest.BusyboxPod("", "exec sleep 3600")
	pod.GenerateName = "egress-"
	pod.Annotations = map[string]string{cni.EgressAnnotation: `[{"host":"198.18.9.9","ports":["5432"]}]`}
	_, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// TestUpWebhookListener: the webhook's listener is opened with up's
// others, before anything is written to the cluster: a port that is taken
// fails up naming --webhook-listen, with the cluster untouched; port 0
// picks a free port, which the webhook configuration then names and the
// cluster calls.
func TestUpWebhookListener(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	c, kube := crClient(t, cluster), cluster.Client(t)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	p := start(t, []string{"KUBECONFIG=" + cluster.Kubeconfig(), "DATABASE_URL=" + pgtest.New(t)},
		"up", "--data-dir", filepath.Join(t.TempDir(), "data"), "--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0",
		"--controller-listen", "127.0.0.1:0", "--apiserver-listen", "127.0.0.1:0", "--webhook-listen", taken.Addr().String())
	want := "--webhook-listen " + taken.Addr().String() + ": the port is in use"
	if err := p.wait(t); err == nil || !strings.Contains(p.stderr.String(), want) {
		t.Errorf("up with a taken webhook port: %v, want an error saying %q:\n%s", err, want, p.stderr.String())
	}
	if left := leftovers(t, c, kube); len(left) > 0 {
		t.Errorf("up that could not listen wrote to the cluster: %v", left)
	}

	p, shown := upWithCluster(t, cluster, filepath.Join(t.TempDir(), "data"), 0, []string{"DATABASE_URL=" + pgtest.New(t)})
	u, err := url.Parse(shown["webhook"])
	if err != nil || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("up --webhook-listen 127.0.0.1:0 printed webhook %q (%v)", shown["webhook"], err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(t.Context(), client.ObjectKey{Name: "bindery-servicebinding"}, &mwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range mwc.Webhooks {
		if w.ClientConfig.URL == nil || *w.ClientConfig.URL != shown["webhook"] {
			t.Errorf("webhook %s calls %v, want %s", w.Name, w.ClientConfig.URL, shown["webhook"])
		}
	}
	// The egress webhook fails closed: the Pod is admitted only if the
	// cluster reached it on the port it was given.
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		p.failIfExited(t)
		return egressPod(ctx, kube, "default")
	})
}

// TestDown: `up` stopped with Ctrl-C takes its webhook configuration
// away (the egress webhook would refuse annotated Pods while no one
// serves it); killed, it cannot, and `bindery down` removes everything
// up installed: the configuration, the servicebinding.io CRDs (after
// releasing the ServiceBindings in them, whose finalizer no controller
// would remove), the namespaces' label, and the Secrets the engine wrote.
func TestDown(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	c, kube := crClient(t, cluster), cluster.Client(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	env := []string{"DATABASE_URL=" + pgtest.New(t)}
	ctx := t.Context()

	p, _ := upWithCluster(t, cluster, dataDir, 0, env)
	if err := p.interrupt(t); err != nil {
		t.Fatalf("up after Ctrl-C: %v\n%s", err, p.stderr.String())
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(installedByUp[0]), &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook configuration after up stopped: %v, want it gone", err)
	}
	if err := egressPod(ctx, kube, "default"); err != nil {
		t.Errorf("a Pod with the egress annotation after up stopped: %v", err)
	}

	// Up again, with a ServiceBinding projected into a workload and a
	// Secret of the engine's, then killed.
	p, shown := upWithCluster(t, cluster, dataDir, 0, env)
	const ns = "shop"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	provisionAndBind(t, shown, ns)
	sb := &sbv1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: sbv1.ServiceBindingSpec{
		Service:  sbv1.ServiceBindingServiceReference{APIVersion: "v1", Kind: "Secret", Name: "app-db"},
		Workload: sbv1.ServiceBindingWorkloadReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
	}}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	web := kubetest.BusyboxPod("", "exec sleep 3600")
	web.Labels = map[string]string{"app": "web"}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, webDeployment("web", web), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		p.failIfExited(t)
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(servicebinding.Projected(&d.Spec.Template)) != 1 {
			return errors.New("the Deployment is not projected yet")
		}
		return nil
	})
	p.kill()
	if err := egressPod(ctx, kube, "default"); err == nil {
		t.Error("a Pod with the egress annotation was admitted while the killed up's webhook was configured")
	}
	if left := leftovers(t, c, kube); len(left) == 0 {
		t.Fatal("nothing of up's in the cluster before down")
	}

	down := start(t, []string{"KUBECONFIG=" + cluster.Kubeconfig()}, "down")
	if err := down.wait(t); err != nil {
		t.Fatalf("bindery down: %v\n%s", err, down.stderr.String())
	}
	if left := leftovers(t, c, kube); len(left) > 0 {
		t.Errorf("left after bindery down: %v", left)
	}
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := servicebinding.Projected(&d.Spec.Template); len(got) != 0 {
		t.Errorf("the Deployment still carries bindings %v after down", got)
	}
	if err := egressPod(ctx, kube, "default"); err != nil {
		t.Errorf("a Pod with the egress annotation after down: %v", err)
	}
	// Again: nothing to do is no error.
	again := start(t, []string{"KUBECONFIG=" + cluster.Kubeconfig()}, "down")
	if err := again.wait(t); err != nil {
		t.Errorf("bindery down, a second time: %v\n%s", err, again.stderr.String())
	}
}

// provisionAndBind provisions an instance of the built-in broker's
// postgresql service through up's REST API and binds it into namespace
// ns as the Secret app-db, which the engine writes in the cluster.
func provisionAndBind(t *testing.T, shown map[string]string, ns string) {
	t.Helper()
	base := strings.TrimSuffix(shown["REST API"], "/api/v1")
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "BINDERY_URL=" + base, "BINDERY_TOKEN=" + shown["admin token"]}
	for _, args := range [][]string{
		{"-n", ns, "provision", "db", "-c", "postgresql", "-p", "small", "--wait"},
		{"-n", ns, "bind", "app", "--instance", "db", "--secret-name", "app-db", "--wait"},
	} {
		p := start(t, env, args...)
		if err := p.wait(t); err != nil {
			t.Fatalf("bindery %s: %v\n%s%s", strings.Join(args, " "), err, p.stdout.String(), p.stderr.String())
		}
	}
}

// webDeployment is a Deployment of one replica of pod's template.
func webDeployment(name string, pod *corev1.Pod) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: pod.Labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec},
		},
	}
}
