package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
)

// bothKubernetesAPIs is the rolling update of the Kubernetes API: the
// previous release's `serve apiserver` (bin old) and this release's, on
// the database both releases serve. An instance created through either
// reaches a watch open through the other, and both list the same
// instances, the settled ones (provisioned before) at the same
// resourceVersions: the engine is still at work on the two new ones.
func bothKubernetesAPIs(t *testing.T, old, dbURL string) {
	t.Helper()
	env := []string{"DATABASE_URL=" + dbURL, "BINDERY_NO_MIGRATE=true"}
	kube := func(p *proc, dir string) versioned.Interface {
		t.Helper()
		servingURL(t, p, "serving the Kubernetes API")
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		return versioned.NewForConfigOrDie(cfg)
	}
	oldDir, newDir := t.TempDir(), t.TempDir()
	apis := map[string]versioned.Interface{
		"previous": kube(startWith(t, old, env, "serve", "apiserver", "--listen", "127.0.0.1:0", "--data-dir", oldDir), oldDir),
		"this":     kube(start(t, env, "serve", "apiserver", "--listen", "127.0.0.1:0", "--data-dir", newDir), newDir),
	}
	ctx := t.Context()
	for from, to := range map[string]string{"previous": "this", "this": "previous"} {
		w, err := apis[to].ServicecatalogV1beta1().ServiceInstances("demo").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch through %s release's API: %v", to, err)
		}
		name := "via-" + from
		in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo"}, Spec: v1beta1.ServiceInstanceSpec{
			PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small"}}}
		if _, err := apis[from].ServicecatalogV1beta1().ServiceInstances("demo").Create(ctx, in, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create through %s release's API: %v", from, err)
		}
		if err := seen(w, name); err != nil {
			t.Errorf("%s created through the %s release's API, watched through the %s one's: %v", name, from, to, err)
		}
	}
	lists := map[string][]string{}
	for release, c := range apis {
		list, err := c.ServicecatalogV1beta1().ServiceInstances("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list through %s release's API: %v", release, err)
		}
		for _, in := range list.Items {
			if strings.HasPrefix(in.Name, "via-") {
				lists[release] = append(lists[release], in.Name)
			} else {
				lists[release] = append(lists[release], in.Name+"@"+in.ResourceVersion)
			}
		}
		slices.Sort(lists[release])
	}
	if !slices.Equal(lists["previous"], lists["this"]) || len(lists["this"]) < 2 {
		t.Errorf("the releases list different instances: previous %v, this %v", lists["previous"], lists["this"])
	}
}

// seen waits for w to deliver name, then stops w.
func seen(w watch.Interface, name string) error {
	defer w.Stop()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("the watch ended")
			}
			if in, isInstance := ev.Object.(*v1beta1.ServiceInstance); isInstance && in.Name == name {
				return nil
			}
		case <-timeout:
			return context.DeadlineExceeded
		}
	}
}
