package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/eventually"
	"github.com/bindery-dev/bindery/internal/keyring"
)

// TestReplicas runs two API servers, each with its own connections, on one
// database, as two replicas behind a Service: what is written through
// either is listed by the other at once and arrives in the other's
// watches, ADDED then DELETED.
func TestReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := setup(t)
	pool, err := pgxpool.New(ctx, apiserver.PoolOf(a.store).Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	keys, _ := keyring.Parse(keyring.Generate()) // API servers read no secret
	b := serve(t, catalog.NewStore(pool, keys, nil), a.broker)

	type arrival struct {
		typ  watch.EventType
		name string
		at   time.Time
	}
	var mu sync.Mutex
	var got []arrival
	for _, r := range []*bundle{a, b} {
		w, err := r.client.ServicecatalogV1beta1().ServiceInstances("team").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if in, ok := ev.Object.(*v1beta1.ServiceInstance); ok {
					mu.Lock()
					got = append(got, arrival{ev.Type, fmt.Sprintf("%p/%s", r, in.Name), time.Now()})
					mu.Unlock()
				}
			}
		}()
	}
	const n = 50
	sent := map[string]time.Time{}
	for i := range n {
		writer, reader := a, b
		if i%2 == 1 {
			writer, reader = b, a
		}
		in := &v1beta1.ServiceInstance{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i), Namespace: "team"},
			Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}}
		sent[fmt.Sprintf("%p/%s", reader, in.Name)] = time.Now()
		if _, err := writer.client.ServicecatalogV1beta1().ServiceInstances("team").Create(ctx, in, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := reader.client.ServicecatalogV1beta1().ServiceInstances("team").Get(ctx, in.Name, metav1.GetOptions{}); err != nil {
			t.Fatalf("written through one replica, read through the other: %v", err)
		}
	}
	if err := a.client.ServicecatalogV1beta1().ServiceInstances("team").Delete(ctx, "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, 30*time.Second, func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		added, deletedOnB := 0, false
		for _, ev := range got {
			switch {
			case ev.typ == watch.Added:
				added++
			case ev.typ == watch.Modified && ev.name == fmt.Sprintf("%p/db-1", b):
				deletedOnB = true // the deletion is under way (finalizer)
			case ev.typ == watch.Deleted && ev.name == fmt.Sprintf("%p/db-1", b):
				deletedOnB = true
			}
		}
		if added != 2*n || !deletedOnB {
			return fmt.Errorf("%d of %d ADDED events; the deletion through one replica seen by the other: %v", added, 2*n, deletedOnB)
		}
		return nil
	})
	var lat []time.Duration
	mu.Lock()
	for _, ev := range got {
		if t0, ok := sent[ev.name]; ok && ev.typ == watch.Added {
			lat = append(lat, ev.at.Sub(t0))
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	t.Logf("write on one replica → event in the other's watch: p50 %s, max %s (%d events)", lat[len(lat)/2], lat[len(lat)-1], len(lat))
}
