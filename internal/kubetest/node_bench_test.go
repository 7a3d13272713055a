package kubetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// BenchmarkNodeStart measures how long a node takes to become Ready once
// the control plane is: images built and imported, containerd and the
// kubelet started, the Node registered and untainted.
func BenchmarkNodeStart(b *testing.B) {
	var took []time.Duration
	for b.Loop() {
		c, err := start(b.Context(), b.TempDir(), WithNode())
		if err == nil {
			took = append(took, c.node.StartupTime)
		}
		if c != nil {
			if err := c.stop(); err != nil {
				b.Errorf("stop: %v", err)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	reportMillis(b, took, "node-ready")
}

// BenchmarkPodStart creates 50 Pods one after another and measures each
// from the create call to the watch event that shows it Running.
func BenchmarkPodStart(b *testing.B) {
	c := Start(b, WithNode())
	cs := c.Client(b)
	const pods = 50
	var took []time.Duration
	for b.Loop() {
		w, err := cs.CoreV1().Pods("default").Watch(b.Context(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range pods {
			name := fmt.Sprintf("p%03d", len(took)+i)
			began := time.Now()
			if _, err := cs.CoreV1().Pods("default").Create(b.Context(), BusyboxPod(name, "exec sleep 3600"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			waitRunningEvent(b, w, name)
			took = append(took, time.Since(began))
		}
		w.Stop()
	}
	reportMillis(b, took, "pod-start")
}

// waitRunningEvent reads w until name is Running.
func waitRunningEvent(b *testing.B, w watch.Interface, name string) {
	timeout := time.After(podTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("pod watch ended")
			}
			if pod, isPod := ev.Object.(*corev1.Pod); isPod && pod.Name == name && pod.Status.Phase == corev1.PodRunning {
				return
			}
		case <-timeout:
			b.Fatalf("pod %s not Running within %s", name, podTimeout)
		}
	}
}

// reportMillis reports the median, 99th percentile and maximum of took.
func reportMillis(b *testing.B, took []time.Duration, what string) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	q := func(p float64) float64 {
		return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), what+"-p50-ms")
	b.ReportMetric(q(0.99), what+"-p99-ms")
	b.ReportMetric(q(1), what+"-max-ms")
}
