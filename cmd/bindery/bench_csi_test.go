package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/roottest"
	"github.com/bindery-dev/bindery/nodeagent/csi"
)

// BenchmarkCSIPodStart measures what csi.bindery.dev adds to a Pod's
// start on a real node: 50 Pods mounting a binding with the driver and 50
// mounting a Secret of the same keys, created one at a time and taking
// turns, each timed from the create call to the watch event that shows it
// Running. Then 5 rotations of the mounted binding, each timed from the
// moment the successor is seen Ready to the moment the Pod's file holds its
// password, with the driver's default refresh interval.
func BenchmarkCSIPodStart(b *testing.B) {
	roottest.Require(b, "the CSI driver on a real node")
	n := setupCSINode(b, csi.DefaultRefreshInterval)
	ctx := b.Context()
	const ns, pods = "bench", 50
	n.namespace(b, ns)
	n.bind(b, ns, "orders", "")
	n.serviceAccount(b, ns, "web", true)
	creds, err := n.sc.ServicecatalogV1beta1().ServiceBindings(ns).GetCredentials(ctx, "orders", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := n.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Data: creds.Data}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var withCSI, withSecret, rotation []time.Duration
	var driverCPU, apiCPU time.Duration
	for b.Loop() {
		driver0, api0 := procCPU(b, n.driver.cmd.Process.Pid), procCPU(b, n.api.cmd.Process.Pid)
		w, err := n.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range pods {
			for _, csiVolume := range []bool{i%2 == 0, i%2 != 0} {
				pod := benchPod(fmt.Sprintf("p%03d-%v", len(withCSI)+i, csiVolume), csiVolume)
				began := time.Now()
				if _, err := n.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				waitRunning(b, w, pod.Name)
				if csiVolume {
					withCSI = append(withCSI, time.Since(began))
				} else {
					withSecret = append(withSecret, time.Since(began))
				}
				_ = n.kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			}
		}
		w.Stop()
		driverCPU += procCPU(b, n.driver.cmd.Process.Pid) - driver0
		apiCPU += procCPU(b, n.api.cmd.Process.Pid) - api0
		rotation = append(rotation, n.rotations(b, ns, 5)...)
	}
	reportQuantiles(b, withCSI, "csi-pod-start")
	reportQuantiles(b, withSecret, "secret-pod-start")
	slices.Sort(withCSI)
	slices.Sort(withSecret)
	b.ReportMetric(float64((withCSI[len(withCSI)/2]-withSecret[len(withSecret)/2]).Microseconds())/1000, "added-p50-ms")
	reportQuantiles(b, rotation, "rotation-to-file")
	// CPU per mounted Pod, the kubelet's republishes and the driver's
	// refreshes while the Pods ran included: what load moves least.
	b.ReportMetric(float64(driverCPU.Microseconds())/1000/float64(len(withCSI)), "driver-cpu-ms/pod")
	b.ReportMetric(float64(apiCPU.Microseconds())/1000/float64(len(withCSI)), "apiserver-cpu-ms/pod")
}

// procCPU is the CPU time (user and system) process pid has used so far,
// from /proc/PID/stat (clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100
}

// rotations rotates the binding a Pod mounts k times and times each from
// the successor seen Ready to the Pod's file holding its password.
func (n *csiNode) rotations(b *testing.B, ns string, k int) []time.Duration {
	ctx := b.Context()
	pod := benchPod(fmt.Sprintf("rotating-%d", time.Now().UnixNano()), true)
	if _, err := n.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var running *corev1.Pod
	eventually.Succeeds(b, 2*time.Minute, func(ctx context.Context) error {
		p, err := n.kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%s not Running (%v)", pod.Name, err)
		}
		running = p
		return nil
	})
	file := filepath.Join(n.kubeletDir, "pods", string(running.UID), "volumes", "kubernetes.io~csi", "db", "mount", "password")
	var took []time.Duration
	pred := "orders"
	for i := range k {
		name := fmt.Sprintf("orders-r%d-%d", i, time.Now().UnixNano()%1e6)
		n.bind(b, ns, name, pred) // returns once it is seen Ready
		ready := time.Now()
		next, err := n.sc.ServicecatalogV1beta1().ServiceBindings(ns).GetCredentials(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if got, _ := os.ReadFile(file); string(got) == string(next.Data["password"]) {
				break
			}
			if time.Since(ready) > 2*time.Minute {
				b.Fatalf("the Pod's password did not change within 2 minutes of rotation %d", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		took = append(took, time.Since(ready))
		pred = name
	}
	_ = n.kube.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	return took
}

// benchPod is a busybox Pod of service account web mounting the binding
// orders with the driver, or the Secret plain.
func benchPod(name string, csiVolume bool) *corev1.Pod {
	spec := deployment("bench", "web", "orders").Spec.Template.Spec
	if !csiVolume {
		spec.Volumes[0].VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "plain"}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// waitRunning reads w until the Pod name is Running.
func waitRunning(b *testing.B, w watch.Interface, name string) {
	timeout := time.After(2 * time.Minute)
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
			b.Fatalf("pod %s not Running within 2 minutes", name)
		}
	}
}

// reportQuantiles reports the median and 99th percentile of took.
func reportQuantiles(b *testing.B, took []time.Duration, what string) {
	if len(took) == 0 {
		return
	}
	took = slices.Clone(took)
	slices.Sort(took)
	q := func(p float64) float64 { return float64(took[int(p*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), what+"-p50-ms")
	b.ReportMetric(q(0.99), what+"-p99-ms")
	b.ReportMetric(q(1), what+"-max-ms")
}
