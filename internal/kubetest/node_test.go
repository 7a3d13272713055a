package kubetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestNode runs Pods on a real node: a Pod reads a Secret volume (through
// kubectl exec) and writes its log (kubectl logs); a Deployment and a
// DaemonSet get their Pods Running. After teardown nothing of the node is
// left on the host.
func TestNode(t *testing.T) {
	var dir string
	var before hostState
	t.Run("pods", func(t *testing.T) {
		c := Start(t, WithNode())
		dir = c.Node().Dir
		// What the node saw under its lock, before it changed anything.
		before = *c.Node().host
		cs := c.Client(t)
		ctx := t.Context()

		_, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			StringData: map[string]string{"password": "s3cret"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod := BusyboxPod("reader", "echo started; exec sleep 3600")
		pod.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds", ReadOnly: true}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got := WaitPodRunning(t, cs, "default", "reader")
		if !strings.HasPrefix(got.Status.PodIP, "198.18.0.") {
			t.Errorf("pod IP %q, want one in %s", got.Status.PodIP, podCIDR)
		}
		out, err := c.Kubectl(t, "exec", "reader", "--", "cat", "/creds/password")
		if err != nil || out != "s3cret" {
			t.Errorf("kubectl exec cat = %q, %v; want s3cret", out, err)
		}
		out, err = c.Kubectl(t, "logs", "reader")
		if err != nil || out != "started\n" {
			t.Errorf("kubectl logs = %q, %v; want started", out, err)
		}

		labels := map[string]string{"app": "web"}
		template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: BusyboxPod("", "exec sleep 3600").Spec}
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: template,
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dsLabels := map[string]string{"app": "agent"}
		dsTemplate := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: dsLabels}, Spec: BusyboxPod("", "exec sleep 3600").Spec}
		if _, err := cs.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
				Template: dsTemplate,
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPods(t, cs, "app=web", 2)
		waitPods(t, cs, "app=agent", 1)

		// One Pod reaches another across the bridge, also on a host whose
		// FORWARD policy is DROP with br_netfilter (forwardRules).
		server := BusyboxPod("server", "mkdir -p /tmp/www && echo hello > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www")
		if _, err := cs.CoreV1().Pods("default").Create(ctx, server, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ip := WaitPodRunning(t, cs, "default", "server").Status.PodIP
		// busybox's nc: its wget resolves through glibc's NSS, which a
		// static build cannot load.
		out, err = c.Kubectl(t, "exec", "reader", "--", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+ip+` 8080`)
		if err != nil || !strings.HasSuffix(out, "\r\n\r\nhello\n") {
			t.Errorf("a Pod fetching http://%s:8080/ from another: %q, %v", ip, out, err)
		}
	})
	if dir == "" {
		return
	}

	// Leftovers: the node's teardown has run. Under the lock, so that
	// another test's node does not count as left over.
	lock, err := acquireLock(t.Context(), lockPath, lockTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	after, err := saveHost()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range before.Sysctls {
		if after.Sysctls[name] != v {
			t.Errorf("sysctl %s = %s after teardown, was %s", name, after.Sysctls[name], v)
		}
	}
	for _, p := range before.Absent {
		if !slices.Contains(after.Absent, p) {
			t.Errorf("%s left behind", p)
		}
	}
	if _, err := os.Stat(statePath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("saved host state %s left behind (%v)", statePath, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node directory %s left behind (%v)", dir, err)
	}
	if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
		t.Errorf("mounts left: %v %v", left, err)
	}
	for _, link := range []string{bridgeName, nodeLink} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", link)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("link %s left behind (%v)", link, err)
		}
	}
	for _, rule := range forwardRules {
		if exec.Command("iptables", append([]string{"-w", "-C"}, rule...)...).Run() == nil {
			t.Errorf("iptables rule %v left behind", rule)
		}
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, cgroupRoot)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup %s left behind (%v)", filepath.Join(h, cgroupRoot), err)
		}
	}
	if pids, err := shimsOf(filepath.Join(dir, "containerd", "containerd.sock")); err != nil || len(pids) > 0 {
		t.Errorf("containerd shims left running: %v %v", pids, err)
	}
}

// waitPods waits until n Pods match selector in default, all Running.
func waitPods(t *testing.T, cs kubernetes.Interface, selector string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), podTimeout)
	defer cancel()
	var last string
	for {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			running := 0
			var phases []string
			for _, p := range pods.Items {
				phases = append(phases, p.Name+":"+string(p.Status.Phase))
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running == n && len(pods.Items) == n {
				return
			}
			last = strings.Join(phases, " ")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pods %s: want %d Running, have %s", selector, n, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
