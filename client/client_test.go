package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/client/clientset/versioned/fake"
	"github.com/bindery-dev/bindery/client/informers/externalversions"
	"github.com/bindery-dev/bindery/internal/eventually"
)

// TestClientsetInformerLister wires the generated pieces together over the
// generated fake clientset: an object created through the typed client
// reaches the lister through the shared informer, and UpdateStatus exists.
func TestClientsetInformerLister(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)

	cs := fake.NewSimpleClientset()
	factory := externalversions.NewSharedInformerFactory(cs, 0)
	instances := factory.Servicecatalog().V1beta1().ServiceInstances()
	lister := instances.Lister()
	informer := instances.Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the stop
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}

	in := &v1beta1.ServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{
			ClusterServiceClassExternalName: "postgresql", ClusterServicePlanExternalName: "small",
		}},
	}
	client := cs.ServicecatalogV1beta1().ServiceInstances("team")
	created, err := client.Create(ctx, in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.ProvisionStatus = v1beta1.ServiceInstanceProvisionStatusProvisioned
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		got, err := lister.ServiceInstances("team").Get("db")
		if err != nil {
			return err
		}
		if got.Status.ProvisionStatus != v1beta1.ServiceInstanceProvisionStatusProvisioned {
			return fmt.Errorf("lister has not seen the update: %+v", got.Status)
		}
		return nil
	})
}
