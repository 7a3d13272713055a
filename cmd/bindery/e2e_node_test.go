package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/internal/kubetest"
)

const nodeResource = "example.com/foo"

// nodeAgentBundle is a real node with `bindery serve nodeagent` registered
// with its kubelet, advertising two device nodes (and passing over a plain
// file its glob also matches).
type nodeAgentBundle struct {
	cluster *kubetest.Cluster
	cs      kubernetes.Interface
	agent   *proc
	devDir  string
}

func setupNodeAgent(t testing.TB) *nodeAgentBundle {
	t.Helper()
	c := kubetest.Start(t, kubetest.WithNode())
	b := &nodeAgentBundle{cluster: c, cs: c.Client(t), devDir: filepath.Join(c.Node().Dir, "devices")}
	if err := os.MkdirAll(b.devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Character devices with /dev/null's numbers, and a plain file, which
	// the runtime would refuse as a device.
	for _, f := range []string{"foo-0", "foo-1"} {
		if err := unix.Mknod(filepath.Join(b.devDir, f), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b.devDir, "foo-plain"), []byte("not a device\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(c.Node().Dir, "nodeagent.yaml")
	if err := os.WriteFile(config, []byte("devicePlugins:\n  - resourceName: "+nodeResource+"\n    devices:\n      - path: "+b.devDir+"/foo-*\n    deviceIDsEnv: FOO_DEVICES\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.agent = start(t, nil, "serve", "nodeagent", "--config", config, "--device-plugin-dir", kubetest.DevicePluginDir, "--listen", "127.0.0.1:0")
	return b
}

// waitAllocatable waits until the Node's allocatable holds n of the
// resource.
func (b *nodeAgentBundle) waitAllocatable(t testing.TB, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var last resource.Quantity
	for {
		node, err := b.cs.CoreV1().Nodes().Get(ctx, kubetest.NodeName, metav1.GetOptions{})
		if err == nil {
			last = node.Status.Allocatable[nodeResource]
			if last.Value() == n {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node allocatable %s = %s, want %d\nagent:\n%s", nodeResource, last.String(), n, b.agent.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// registrations counts the agent's registrations with a kubelet.
func (b *nodeAgentBundle) registrations() int {
	return strings.Count(b.agent.stderr.String(), `msg="registered with the kubelet"`)
}

// TestNodeagentOnRealNode runs `bindery serve nodeagent` beside a real
// kubelet: the Node's allocatable shows the two device nodes (not the
// plain file), a Pod that requests one runs with the device inside, and
// after a kubelet restart the agent registers again and the Pod keeps
// running.
func TestNodeagentOnRealNode(t *testing.T) {
	b := setupNodeAgent(t)
	b.waitAllocatable(t, 2)
	if !strings.Contains(b.agent.stderr.String(), "foo-plain") {
		t.Errorf("the agent did not log the plain file it left out:\n%s", b.agent.stderr.String())
	}

	pod := kubetest.BusyboxPod("uses-foo", "exec sleep 3600")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{nodeResource: resource.MustParse("1")}
	if _, err := b.cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitPodRunning(t, b.cs, "default", "uses-foo")
	out, err := b.cluster.Kubectl(t, "exec", "uses-foo", "--", "sh", "-c", `echo "$FOO_DEVICES"; test -c "`+b.devDir+`/$FOO_DEVICES" && echo char-device`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(out)
	if len(lines) != 2 || (lines[0] != "foo-0" && lines[0] != "foo-1") || lines[1] != "char-device" {
		t.Errorf("inside the Pod: %q, want the device's ID and char-device", out)
	}

	before := b.registrations()
	restarted := time.Now()
	b.cluster.Node().RestartKubelet(t)
	took := waitRegistrations(t, b, before+1)
	t.Logf("re-registered %s after the kubelet restarted", took.Sub(restarted).Round(time.Millisecond))
	b.waitAllocatable(t, 2)
	kubetest.WaitPodRunning(t, b.cs, "default", "uses-foo")
}

// waitRegistrations waits until the agent has registered n times and
// returns when it saw the last.
func waitRegistrations(t testing.TB, b *nodeAgentBundle, n int) time.Time {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b.registrations() >= n {
			return time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the agent registered %d times, want %d:\n%s", b.registrations(), n, b.agent.stderr.String())
	return time.Time{}
}

// BenchmarkKubeletRestartReregistration measures how long after a real
// kubelet restarts the agent is registered with it again (from the new
// kubelet's start to the agent's log of the registration).
func BenchmarkKubeletRestartReregistration(b *testing.B) {
	nb := setupNodeAgent(b)
	nb.waitAllocatable(b, 2)
	var took []time.Duration
	for b.Loop() {
		before := nb.registrations()
		restarted := time.Now()
		nb.cluster.Node().RestartKubelet(b)
		took = append(took, waitRegistrations(b, nb, before+1).Sub(restarted))
	}
	reportPercentiles(b, took)
}

// reportPercentiles reports the median, 99th percentile and maximum of
// took in milliseconds.
func reportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	q := func(p float64) float64 {
		return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
}
