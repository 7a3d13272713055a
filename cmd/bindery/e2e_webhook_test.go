package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// upWithCluster runs `bindery up` against cluster, on free ports, with the
// webhook on webhookPort, and waits for its banner.
func upWithCluster(t testing.TB, cluster *kubetest.Cluster, dataDir string, webhookPort int, env []string, args ...string) (*proc, map[string]string) {
	t.Helper()
	p := start(t, append([]string{"KUBECONFIG=" + cluster.Kubeconfig()}, env...),
		append([]string{"up", "--data-dir", dataDir,
			"--broker-listen", "127.0.0.1:0", "--catalog-listen", "127.0.0.1:0", "--controller-listen", "127.0.0.1:0",
			"--apiserver-listen", "127.0.0.1:0", "--webhook-listen", "127.0.0.1:" + strconv.Itoa(webhookPort)}, args...)...)
	eventually.Succeeds(t, 2*time.Minute, func(context.Context) error {
		p.failIfExited(t)
		if !strings.Contains(p.stdout.String(), "Press Ctrl-C") {
			return fmt.Errorf("no banner:\n%s\n%s", p.stdout.String(), p.stderr.String())
		}
		return nil
	})
	return p, printed(p.stdout.String())
}

func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// crClient is a controller-runtime client of the cluster as its admin,
// with the servicebinding.io types.
func crClient(t testing.TB, cluster *kubetest.Cluster) client.Client {
	t.Helper()
	// controller-runtime complains, with a stack, when its package logger
	// was never set; the test has nothing to log through it.
	ctrllog.SetLogger(logr.Discard())
	scheme, err := servicebinding.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cluster.Config(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUpWebhook runs `bindery up --kubeconfig` with the servicebinding.io
// webhook: it makes its certificates under the data directory, installs
// the CRDs and the MutatingWebhookConfiguration (pointing at
// --webhook-listen, trusting its CA), and a Pod created in a bound
// namespace comes back projected. A restart keeps the same CA.
func TestUpWebhook(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	c := crClient(t, cluster)
	dataDir := filepath.Join(t.TempDir(), "data")
	port := freeTCPPort(t)
	env := []string{"DATABASE_URL=" + pgtest.New(t)}
	p, shown := upWithCluster(t, cluster, dataDir, port, env)
	wantURL := "https://127.0.0.1:" + strconv.Itoa(port) + servicebinding.MutatePath
	if shown["webhook"] != wantURL {
		t.Errorf("up printed webhook %q, want %s", shown["webhook"], wantURL)
	}
	caPEM, err := os.ReadFile(filepath.Join(dataDir, "webhook", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.key", "tls.key"} {
		if st, err := os.Stat(filepath.Join(dataDir, "webhook", f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("webhook/%s: %v, %v; want mode 0600", f, st, err)
		}
	}
	checkConfig := func() {
		t.Helper()
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(t.Context(), client.ObjectKey{Name: "bindery-servicebinding"}, &mwc); err != nil {
			t.Fatal(err)
		}
		for _, w := range mwc.Webhooks {
			if w.ClientConfig.URL == nil || *w.ClientConfig.URL != wantURL || !bytes.Equal(w.ClientConfig.CABundle, caPEM) || w.ClientConfig.Service != nil {
				t.Errorf("webhook %s calls %+v, want %s with the data directory's CA", w.Name, w.ClientConfig, wantURL)
			}
		}
		if _, ok := mwc.Annotations["cert-manager.io/inject-ca-from"]; ok {
			t.Error("the configuration still asks cert-manager for its CA")
		}
	}
	checkConfig()

	ns := "shop"
	kube := cluster.Client(t)
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"type": "postgresql", "uri": "postgres://db.example/app"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sb := &sbv1.ServiceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: sbv1.ServiceBindingSpec{
		Service:  sbv1.ServiceBindingServiceReference{APIVersion: "v1", Kind: "Secret", Name: "db"},
		Workload: sbv1.ServiceBindingWorkloadReference{APIVersion: "v1", Kind: "Pod", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}}
	if err := c.Create(t.Context(), sb); err != nil {
		t.Fatal(err)
	}
	projectedPod := func(ctx context.Context) error {
		p.failIfExited(t)
		pod := kubetest.BusyboxPod("web", "exec sleep 3600")
		pod.Labels = map[string]string{"app": "web"}
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(got.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == servicebinding.VolumeName(sb.UID) }) {
			return fmt.Errorf("the Pod came back unprojected: %+v\n%s", got.Spec.Volumes, p.stderr.String())
		}
		return nil
	}
	eventually.Succeeds(t, time.Minute, projectedPod)
	// Every server of up, the webhook and its controller's watches of the
	// cluster among them, stops within the grace period.
	t.Logf("up exited %s after SIGTERM", p.terminate(t).Round(time.Millisecond))

	p, _ = upWithCluster(t, cluster, dataDir, port, env)
	again, err := os.ReadFile(filepath.Join(dataDir, "webhook", "ca.crt"))
	if err != nil || !bytes.Equal(again, caPEM) {
		t.Errorf("the webhook's CA changed across a restart (%v)", err)
	}
	checkConfig()
	eventually.Succeeds(t, time.Minute, projectedPod)
	if err := p.interrupt(t); err != nil {
		t.Fatalf("up after Ctrl-C: %v\n%s", err, p.stderr.String())
	}

	// A listen address without a port is refused before anything starts.
	p = start(t, []string{"KUBECONFIG=" + cluster.Kubeconfig(), "DATABASE_URL=" + pgtest.New(t)}, "up", "--data-dir", t.TempDir(), "--webhook-listen", "127.0.0.1")
	if err := p.wait(t); err == nil || !strings.Contains(p.stderr.String(), "--webhook-listen") {
		t.Errorf("up --webhook-listen 127.0.0.1: %v\n%s", err, p.stderr.String())
	}
}
