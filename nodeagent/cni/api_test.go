package cni_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/nodeagent/cni"
)

// TestGrantsFromAPIServer covers runtimes that do not pass Pod annotations:
// the plugin reads the Pod from a real kube-apiserver, as a user allowed
// nothing but to get Pods.
func TestGrantsFromAPIServer(t *testing.T) {
	l := setup(t)
	const user = "system:node:bindery-cni-test"
	cluster := kubetest.Start(t, kubetest.WithUser(user), kubetest.WithAPIServerFlags("--disable-admission-plugins=ServiceAccount"))
	client := cluster.Client(t)
	c := ctx(t)
	if _, err := client.RbacV1().ClusterRoles().Create(c, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bindery-cni"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(c, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bindery-cni"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "bindery-cni"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grant, err := json.Marshal([]cni.Endpoint{{Host: l.svc.IP.String(), Ports: []string{strconv.Itoa(l.svcPorts[0])}, Protocol: "tcp"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, annotations := range map[string]map[string]string{
		"bound":   {cni.EgressAnnotation: string(grant)},
		"unbound": nil,
	} {
		if _, err := client.CoreV1().Pods("default").Create(c, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The runtime passes no annotations: the plugin has no capabilities.
	list := l.conflist("1.1.0", true)
	var raw map[string]any
	if err := json.Unmarshal(list.Bytes, &raw); err != nil {
		t.Fatal(err)
	}
	plugin := raw["plugins"].([]any)[1].(map[string]any)
	delete(plugin, "capabilities")
	plugin["kubeconfig"] = cluster.KubeconfigFor(user)
	data, _ := json.Marshal(raw)
	list, err = libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		pod      string
		reachesA bool
	}{{"bound", true}, {"unbound", false}, {"missing", false}} {
		t.Run(tc.pod, func(t *testing.T) {
			p := l.newPod(nil)
			p.rt.Args = [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", tc.pod}}
			_, err := l.cni.AddNetworkList(ctx(t), list, p.rt)
			if tc.pod == "missing" {
				// A Pod the server does not know: try again later.
				var cerr *types.Error
				if !errors.As(err, &cerr) || cerr.Code != types.ErrTryAgainLater || !strings.Contains(cerr.Msg, "default/missing") {
					t.Fatalf("ADD for a Pod the server does not have: %#v, want code %d naming the Pod", err, types.ErrTryAgainLater)
				}
				return
			}
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			t.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(t), list, p.rt) })
			if tc.reachesA && !p.reaches(t, l.svc.IP, l.svcPorts[0]) {
				t.Errorf("Pod %s does not reach %s:%d", tc.pod, l.svc.IP, l.svcPorts[0])
			}
			if !tc.reachesA && !p.dropped(t, l.svc.IP, l.svcPorts[0]) {
				t.Errorf("Pod %s reaches %s:%d", tc.pod, l.svc.IP, l.svcPorts[0])
			}
			if !p.dropped(t, l.svc.IP, l.svcPorts[1]) {
				t.Errorf("Pod %s reaches %s:%d, never granted", tc.pod, l.svc.IP, l.svcPorts[1])
			}
		})
	}
}
