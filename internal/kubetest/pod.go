package kubetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// podTimeout bounds how long WaitPodRunning waits.
const podTimeout = 2 * time.Minute

// BusyboxPod returns a Pod named name (which may be empty, for a template)
// that runs script with sh in BusyboxImage, never pulled, on the node, and
// stops at once when deleted.
func BusyboxPod(name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sh", "-c", script},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
		},
	}
}

// WaitPodRunning waits until the Pod is Running and returns it; it fails t
// when the Pod fails or does not run within two minutes, with its
// container states and events.
func WaitPodRunning(t testing.TB, cs kubernetes.Interface, namespace, name string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), podTimeout)
	defer cancel()
	var last *corev1.Pod
	for {
		pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = pod
			switch pod.Status.Phase {
			case corev1.PodRunning:
				return pod
			case corev1.PodFailed, corev1.PodSucceeded:
				t.Fatalf("pod %s/%s %s: %s", namespace, name, pod.Status.Phase, describePod(t, cs, pod))
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s/%s not Running: %s", namespace, name, describePod(t, cs, last))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// describePod says what a Pod's containers are doing and what its events
// say, for a failure message.
func describePod(t testing.TB, cs kubernetes.Interface, pod *corev1.Pod) string {
	if pod == nil {
		return "no pod"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", pod.Status.Phase)
	for _, s := range pod.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, "; %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, "; %s terminated: %s %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.Message)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events, err := cs.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "\n  event %s %s: %s", e.Type, e.Reason, e.Message)
		}
	}
	return b.String()
}
