package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/nodeagent/csi"
)

// csiNode is the CSI stack on a real node: the driver, run as `bindery
// serve nodeagent --csi` on the host, registered with the node's kubelet,
// and the CSIDriver object of deploy/csi; the target PostgreSQL on the
// node's address, which Pods reach.
type csiNode struct {
	*csiStack
	kubeletDir string
	driver     *proc
	refresh    time.Duration
}

func setupCSINode(t testing.TB, refresh time.Duration) *csiNode {
	t.Helper()
	cluster := kubetest.Start(t, kubetest.WithNode())
	node := netip.MustParseAddr(kubetest.NodeIP)
	_, target := targetPostgres(t, node, node)
	s := startCSIStack(t, cluster, "127.0.0.1", nil, "--target-database-url", target)
	if _, err := cluster.Kubectl(t, "apply", "-f", filepath.Join("..", "..", "deploy", "csi", "csidriver.yaml")); err != nil {
		t.Fatal(err)
	}
	n := &csiNode{csiStack: s, kubeletDir: filepath.Join(cluster.Node().Dir, "kubelet", "root")}
	n.refresh = refresh
	n.driver = s.startDriver(t, n.kubeletDir, kubetest.NodeName, "--csi-refresh-interval", refresh.String())
	n.waitRegistered(t)
	return n
}

// waitRegistered waits until the node's CSINode lists the driver: the
// kubelet took its registration.
func (n *csiNode) waitRegistered(t testing.TB) {
	t.Helper()
	eventually.Succeeds(t, time.Minute, func(ctx context.Context) error {
		cn, err := n.kube.StorageV1().CSINodes().Get(ctx, kubetest.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == csi.Name {
				return nil
			}
		}
		return fmt.Errorf("CSINode lists %v\n%s", cn.Spec.Drivers, tail(n.driver.stderr.String(), 2000))
	})
}

// deployment is a Deployment of one busybox Pod, as service account sa,
// mounting binding at /bindings/<binding> with csi.bindery.dev.
func deployment(name, sa, binding string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:            sa,
					AutomountServiceAccountToken:  ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers: []corev1.Container{{
						Name: "main", Image: kubetest.BusyboxImage, ImagePullPolicy: corev1.PullNever,
						Command:      []string{"sh", "-c", "exec sleep 3600"},
						VolumeMounts: []corev1.VolumeMount{{Name: "db", MountPath: "/bindings/" + binding, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
						Driver: csi.Name, ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{csi.AttributeBinding: binding},
					}}}},
				},
			},
		},
	}
}

// fsGroupOnly: a Pod with an fsGroup, running as a user of its own, reads
// the files through that group, and they are root's and the group's
// only; the kubelet handed the driver the group (VOLUME_MOUNT_GROUP).
func (n *csiNode) fsGroupOnly(t *testing.T, ns string, password []byte) {
	t.Helper()
	d := deployment("grouped", "web", "orders")
	d.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), FSGroup: ptr.To(int64(4321))}
	if _, err := n.kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := n.runningPod(t, ns, "grouped")
	if got := n.read(t, ns, pod.Name, "/bindings/orders/password"); got != string(password) {
		t.Errorf("user 1000 of group 4321 reads %d bytes of the password, not its %d", len(got), len(password))
	}
	for _, path := range []string{"/bindings/orders", "/bindings/orders/..data/", "/bindings/orders/..data/password"} {
		out, err := n.cluster.Kubectl(t, "exec", "-n", ns, pod.Name, "--", "stat", "-c", "%a %u:%g", path)
		if err != nil {
			t.Fatalf("stat %s: %v", path, err)
		}
		if want := map[bool]string{true: "440 0:4321", false: "750 0:4321"}[strings.HasSuffix(path, "password")]; strings.TrimSpace(out) != want {
			t.Errorf("%s: %q, want %q", path, strings.TrimSpace(out), want)
		}
	}
	if err := n.kube.AppsV1().Deployments(ns).Delete(t.Context(), "grouped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runningPod waits for the one Running Pod of the Deployment.
func (n *csiNode) runningPod(t testing.TB, ns, app string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually.Succeeds(t, 2*time.Minute, func(ctx context.Context) error {
		pods, err := n.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return err
		}
		for i, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pod = &pods.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no Running Pod of %s: %d Pods\ndriver:\n%s", app, len(pods.Items), tail(n.driver.stderr.String(), 3000))
	})
	return pod
}

// read reads a file inside the Pod.
func (n *csiNode) read(t testing.TB, ns, pod, path string) string {
	t.Helper()
	out, err := n.cluster.Kubectl(t, "exec", "-n", ns, pod, "--", "cat", path)
	if err != nil {
		t.Fatalf("cat %s in %s: %v", path, pod, err)
	}
	return out
}

// TestCSIOnRealNode: a Deployment mounts a binding that has no Secret
// (none exists, and etcd holds none of its bytes); the Pod reads
// /bindings/orders/uri and logs in to the database with it; a rotation
// changes the mounted password without restarting the Pod, and survives
// the predecessor's deletion; a Pod whose service account may not read
// the binding does not start, and its Event names the permission; the
// agent restarting leaves the mounted Pod working and registers again;
// deleting the Deployment unmounts the tmpfs.
func TestCSIOnRealNode(t *testing.T) {
	n := setupCSINode(t, 2*time.Second)
	ctx := t.Context()
	const ns = "shop"
	n.namespace(t, ns)
	n.bind(t, ns, "orders", "")
	n.serviceAccount(t, ns, "web", true)
	n.serviceAccount(t, ns, "nosy", false)
	if _, err := n.kube.AppsV1().Deployments(ns).Create(ctx, deployment("web", "web", "orders"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := n.runningPod(t, ns, "web")
	creds, err := n.sc.ServicecatalogV1beta1().ServiceBindings(ns).GetCredentials(ctx, "orders", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"type", "provider", "uri", "username", "password"} {
		if got := n.read(t, ns, pod.Name, "/bindings/orders/"+key); got == "" || got != string(creds.Data[key]) {
			t.Errorf("/bindings/orders/%s in the Pod: %d bytes, not the binding's %d", key, len(got), len(creds.Data[key]))
		}
	}
	netns := podNetNS(t, pod.Status.PodIP)
	uri := n.read(t, ns, pod.Name, "/bindings/orders/uri")
	if out, err := psqlIn(netns, uri, "SELECT session_user"); err != nil || out != string(creds.Data["username"]) {
		t.Errorf("psql from the Pod's network namespace with /bindings/orders/uri: %q, %v", out, err)
	}
	n.noSecretAnywhere(t, creds.Data["password"])
	n.fsGroupOnly(t, ns, creds.Data["password"])

	// A rotation: orders-2 rotates orders; the Pod's files follow, the
	// container is the same, and the new credentials log in.
	rotated := time.Now()
	n.bind(t, ns, "orders-2", "orders")
	next, err := n.sc.ServicecatalogV1beta1().ServiceBindings(ns).GetCredentials(ctx, "orders-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 2*time.Minute, func(context.Context) error {
		if got := n.read(t, ns, pod.Name, "/bindings/orders/password"); got != string(next.Data["password"]) {
			return fmt.Errorf("the mounted password is not the rotated one yet")
		}
		return nil
	})
	t.Logf("rotation to file: %v after the successor was requested (broker included)", time.Since(rotated).Round(time.Millisecond))
	if out, err := psqlIn(netns, n.read(t, ns, pod.Name, "/bindings/orders/uri"), "SELECT session_user"); err != nil || out != string(next.Data["username"]) {
		t.Errorf("psql with the rotated uri: %q, %v", out, err)
	}
	n.sameContainer(t, ns, pod)
	// Deleting the predecessor (its role dropped) leaves the Pod on the
	// successor.
	if err := n.sc.ServicecatalogV1beta1().ServiceBindings(ns).Delete(ctx, "orders", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 2*time.Minute, func(ctx context.Context) error {
		if _, err := n.sc.ServicecatalogV1beta1().ServiceBindings(ns).Get(ctx, "orders", metav1.GetOptions{}); err == nil {
			return fmt.Errorf("orders still exists")
		}
		return nil
	})
	// Two refreshes after the deletion, both successful: they read
	// orders-2, which the volume follows since the rotation.
	n.waitRefreshes(t, 2)
	if got := n.read(t, ns, pod.Name, "/bindings/orders/password"); got != string(next.Data["password"]) {
		t.Errorf("after the predecessor's deletion the Pod lost the rotated password")
	}

	n.refusedPod(t, ns)
	n.restartDriver(t, ns, pod, next.Data["password"])

	// Deleting the Deployment unmounts the tmpfs.
	if err := n.kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 2*time.Minute, func(ctx context.Context) error {
		pods, err := n.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods left (%v)", len(pods.Items), err)
		}
		if m := mountsUnderDir(t, filepath.Join(n.kubeletDir, "pods", string(pod.UID))); len(m) > 0 {
			return fmt.Errorf("mounts left: %v", m)
		}
		return nil
	})
}

// noSecretAnywhere: no Secret of the cluster, and no value in etcd, holds
// the password.
func (n *csiNode) noSecretAnywhere(t testing.TB, password []byte) {
	t.Helper()
	if len(password) < 16 {
		t.Fatalf("a password of %d bytes proves nothing by its absence", len(password))
	}
	out, err := n.cluster.Kubectl(t, "get", "secrets", "-A", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, string(password)) || strings.Contains(out, b64(password)) {
		t.Error("kubectl get secrets -A shows the binding's password")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.cluster.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(t.Context(), "/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) < 50 {
		t.Fatalf("etcd holds %d keys: not the cluster's", len(resp.Kvs))
	}
	for _, kv := range resp.Kvs {
		if bytes.Contains(kv.Value, password) || bytes.Contains(kv.Value, []byte(b64(password))) {
			t.Errorf("etcd key %s holds the binding's password", kv.Key)
		}
	}
}

// sameContainer: the Pod was not restarted.
func (n *csiNode) sameContainer(t testing.TB, ns string, pod *corev1.Pod) {
	t.Helper()
	now, err := n.kube.CoreV1().Pods(ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was, is := pod.Status.ContainerStatuses[0], now.Status.ContainerStatuses[0]
	if now.UID != pod.UID || is.ContainerID != was.ContainerID || is.RestartCount != 0 {
		t.Errorf("the Pod restarted: container %s → %s, restarts %d", was.ContainerID, is.ContainerID, is.RestartCount)
	}
}

// refreshes reads the driver's count of its own successful refreshes
// from its /metrics.
func (n *csiNode) refreshes(t testing.TB) int {
	t.Helper()
	m := regexp.MustCompile(`serving health and metrics.* addr=(\S+)`).FindStringSubmatch(n.driver.stderr.String())
	if m == nil {
		t.Fatalf("the driver did not say where it serves metrics:\n%s", n.driver.stderr.String())
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	c := regexp.MustCompile(`(?m)^bindery_csi_refreshes_total\{result="ok"\} (\d+)$`).FindSubmatch(body)
	if c == nil {
		return 0
	}
	v, _ := strconv.Atoi(string(c[1]))
	return v
}

// waitRefreshes waits until the driver has refreshed its volumes k more
// times, successfully.
func (n *csiNode) waitRefreshes(t testing.TB, k int) {
	t.Helper()
	from := n.refreshes(t)
	eventually.Succeeds(t, time.Minute, func(context.Context) error {
		if got := n.refreshes(t); got < from+k {
			return fmt.Errorf("%d refreshes since, want %d\n%s", got-from, k, tail(n.driver.stderr.String(), 2000))
		}
		return nil
	})
}

// refusedPod: a Pod of a service account without the grant stays in
// ContainerCreating, and its FailedMount Event names the permission.
func (n *csiNode) refusedPod(t testing.TB, ns string) {
	t.Helper()
	ctx := t.Context()
	if _, err := n.kube.AppsV1().Deployments(ns).Create(ctx, deployment("nosy", "nosy", "orders-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 2*time.Minute, func(ctx context.Context) error {
		pods, err := n.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=nosy"})
		if err != nil || len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods of nosy (%v)", len(pods.Items), err)
		}
		p := pods.Items[0]
		if p.Status.Phase == corev1.PodRunning {
			t.Fatalf("the Pod of a service account without the grant runs")
		}
		evs, err := n.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
			"involvedObject.name": p.Name, "reason": "FailedMount"}).String()})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "service account shop/nosy may not get servicebindings/credentials") && strings.Contains(e.Message, `"orders-2"`) {
				return nil
			}
		}
		return fmt.Errorf("no FailedMount Event naming the permission yet: %d events", len(evs.Items))
	})
	if err := n.kube.AppsV1().Deployments(ns).Delete(ctx, "nosy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// restartDriver kills the agent and starts it again: the mounted Pod keeps
// its files, the kubelet registers the driver again, and a new Pod mounts.
func (n *csiNode) restartDriver(t testing.TB, ns string, pod *corev1.Pod, password []byte) {
	t.Helper()
	_ = n.driver.cmd.Process.Signal(syscall.SIGKILL)
	n.driver.kill()
	if got := n.read(t, ns, pod.Name, "/bindings/orders/password"); got != string(password) {
		t.Errorf("with the agent down the Pod's password changed")
	}
	n.driver = n.startDriver(t, n.kubeletDir, kubetest.NodeName, "--csi-refresh-interval", n.refresh.String())
	eventually.Succeeds(t, time.Minute, func(context.Context) error {
		if !strings.Contains(n.driver.stderr.String(), "registered with the kubelet") {
			return fmt.Errorf("the restarted agent is not registered:\n%s", tail(n.driver.stderr.String(), 2000))
		}
		return nil
	})
	n.waitRegistered(t)
	if got := n.read(t, ns, pod.Name, "/bindings/orders/password"); got != string(password) {
		t.Errorf("after the agent restarted the Pod's password changed")
	}
	n.sameContainer(t, ns, pod)
	ctx := t.Context()
	if _, err := n.kube.AppsV1().Deployments(ns).Create(ctx, deployment("after", "web", "orders-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	after := n.runningPod(t, ns, "after")
	if got := n.read(t, ns, after.Name, "/bindings/orders-2/password"); got != string(password) {
		t.Errorf("a Pod started after the restart reads another password")
	}
	if err := n.kube.AppsV1().Deployments(ns).Delete(ctx, "after", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// mountsUnderDir lists the mount points under dir.
func mountsUnderDir(t testing.TB, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}
