package apiserver

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/registry/rest/resttest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/osbtest"
	"github.com/bindery-dev/bindery/internal/pgtest"
	"github.com/bindery-dev/bindery/migrations"
	"github.com/jackc/pgx/v5/pgxpool"
)

// storagesForTest builds the REST storages over a fresh catalog with a fake
// broker registered, without serving them.
func storagesForTest(t *testing.T) (map[string]rest.Storage, *catalog.Store) {
	t.Helper()
	storages, store, _, _ := storagesWithBroker(t)
	return storages, store
}

// NewTestStore gives a test the catalog on a database of its own. The
// package's external tests use it too.
func NewTestStore(t testing.TB) *catalog.Store {
	t.Helper()
	pool := pgtest.Pool(t)
	if err := migrations.Up(context.Background(), pool, migrations.Catalog); err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Parse(keyring.Generate())
	if err != nil {
		t.Fatal(err)
	}
	store := catalog.NewStore(pool, keys, nil)
	testPools.Store(store, pool)
	return store
}

// testPools is the pool under each test store, for the tests that put on
// a row what no API writes (labels on a class).
var testPools sync.Map // *catalog.Store → *pgxpool.Pool

// PoolOf is poolOf for the tests outside the package.
func PoolOf(store *catalog.Store) *pgxpool.Pool { return poolOf(store) }

func poolOf(store *catalog.Store) *pgxpool.Pool {
	p, _ := testPools.Load(store)
	return p.(*pgxpool.Pool)
}

// RegisterFakeBroker registers an internal/osbtest broker as "fake" and
// fetches its catalogue (class fake-service, plans sync, async, …).
func RegisterFakeBroker(t testing.TB, store *catalog.Store) (*osbtest.Broker, *catalog.Broker) {
	t.Helper()
	ctx := context.Background()
	fake := osbtest.New(t)
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: fake.URL()}}
	b.Name = "fake"
	b, err := store.CreateBroker(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = store.Relist(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	return fake, b
}

// storagesWithBroker is storagesForTest that also gives the fake broker
// and its catalog id.
func storagesWithBroker(t *testing.T) (map[string]rest.Storage, *catalog.Store, *osbtest.Broker, string) {
	t.Helper()
	store := NewTestStore(t)
	fake, b := RegisterFakeBroker(t, store)
	bg, cancel := context.WithCancel(context.Background())
	s := &Server{hub: newHub(store, nil), bg: bg, stopBg: cancel}
	s.hub.log = discardLogger()
	s.log = discardLogger()
	go s.hub.run(bg)
	t.Cleanup(cancel)
	return s.storages(store, time.Minute), store, fake, b.ID
}

func validInstance() *v1beta1.ServiceInstance {
	return &v1beta1.ServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "foo"},
		Spec: v1beta1.ServiceInstanceSpec{PlanReference: v1beta1.PlanReference{
			ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync",
		}},
	}
}

// TestRESTConformance runs k8s.io/apiserver's generic REST storage tests
// (resttest) against the ServiceInstance storage.
func TestRESTConformance(t *testing.T) {
	t.Parallel()
	var instances *finalizing
	var store *catalog.Store
	fresh := func(t *testing.T) {
		var storages map[string]rest.Storage
		storages, store = storagesForTest(t)
		instances = &finalizing{instanceStorage: storages["serviceinstances"].(*instanceStorage)}
	}
	createFn := func(ctx context.Context, obj runtime.Object) error {
		_, err := instances.Create(ctx, obj, nil, &metav1.CreateOptions{})
		return err
	}
	getFn := func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
		return instances.Get(ctx, obj.(*v1beta1.ServiceInstance).Name, &metav1.GetOptions{})
	}
	// A plan not offered yet is valid (the instance waits for it); naming
	// the class two ways is not.
	invalid := validInstance()
	invalid.Spec.ClusterServiceClassExternalID = "fake-service-id"

	t.Run("create", func(t *testing.T) {
		// Everything of TestCreate passes but testCreateDryRunEquals: a
		// dry run answers the object as a create makes it, but the create
		// after it gets a spec.externalID of its own.
		resttestAllBut(t, "testCreateDryRunEquals", func(t *testing.T) {
			fresh(t)
			test := resttest.New(t, instances)
			test.TestCreate(validInstance(), createFn, getFn, invalid)
		})
	})
	t.Run("update", func(t *testing.T) {
		fresh(t)
		test := resttest.New(t, instances)
		test.TestUpdate(validInstance(), createFn, getFn,
			func(obj runtime.Object) runtime.Object {
				o := obj.(*v1beta1.ServiceInstance)
				o.Labels = map[string]string{"changed": "yes"}
				return o
			},
			func(obj runtime.Object) runtime.Object {
				o := obj.(*v1beta1.ServiceInstance)
				o.Spec.ClusterServicePlanExternalName = "no-such-plan"
				return o
			})
	})
	t.Run("get", func(t *testing.T) {
		fresh(t)
		test := resttest.New(t, instances)
		test.TestGet(validInstance())
	})
	t.Run("delete", func(t *testing.T) {
		// TestDelete passes but testDeleteWithUID, whose object is created
		// with uid "UID0000" (straight into etcd in Kubernetes' own use):
		// here the uid is the catalog's id, a UUID the catalog assigns.
		resttestAllBut(t, "testDeleteWithUID", func(t *testing.T) {
			fresh(t)
			test := resttest.New(t, instances).ReturnDeletedObject()
			test.TestDelete(validInstance(), clearingLeftover(instances, createFn), getFn, apierrors.IsNotFound)
		})
	})
	t.Run("watch", func(t *testing.T) {
		fresh(t)
		test := resttest.New(t, instances)
		ensure := func(ctx context.Context, obj runtime.Object, present bool) error {
			name := obj.(*v1beta1.ServiceInstance).Name
			_, err := instances.Get(ctx, name, nil)
			switch {
			case err == nil && !present:
				_, _, err = instances.Delete(ctx, name, nil, nil)
				return err
			case apierrors.IsNotFound(err) && present:
				return createFn(ctx, obj.DeepCopyObject())
			case apierrors.IsNotFound(err):
				return nil
			}
			return err
		}
		emit := func(obj runtime.Object, action string) error {
			ctx := test.TestContext()
			switch action {
			case "ADDED":
				if err := ensure(ctx, obj, false); err != nil {
					return err
				}
				return createFn(ctx, obj.DeepCopyObject())
			case "MODIFIED":
				if err := ensure(ctx, obj, true); err != nil {
					return err
				}
				o := obj.(*v1beta1.ServiceInstance)
				_, err := store.UpdateInstanceStatus(ctx, mustID(t, instances, ctx, o.Name), func(in *catalog.Instance) error {
					in.Status.DashboardURL = time.Now().String()
					return nil
				})
				return err
			case "DELETED":
				if err := ensure(ctx, obj, true); err != nil {
					return err
				}
				return ensure(ctx, obj, false)
			}
			return nil
		}
		valid := validInstance()
		valid.Labels = map[string]string{"app": "db"}
		test.TestWatch(valid, emit,
			[]labels.Set{{"app": "db"}}, []labels.Set{{"app": "other"}},
			[]fields.Set{{"metadata.name": "foo"}, {"spec.clusterServicePlanExternalName": "sync"}},
			[]fields.Set{{"metadata.name": "bar"}},
			[]string{"ADDED", "MODIFIED", "DELETED"})
	})
	t.Run("list", func(t *testing.T) {
		fresh(t)
		test := resttest.New(t, instances)
		test.TestList(validInstance(), func(objs []runtime.Object) []runtime.Object {
			ctx := context.Background()
			// The storage holds exactly objs: remove the rest, as the
			// engine would after a delete.
			all, err := store.ListInstances(ctx, catalog.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range all.Items {
				if _, err := store.DeleteInstance(ctx, in.ID); err != nil {
					t.Fatal(err)
				}
				if err := store.FinalizeInstance(ctx, in.ID, catalog.EventRecord{Type: "Normal", Reason: "Test"}); err != nil {
					t.Fatal(err)
				}
			}
			out := make([]runtime.Object, 0, len(objs))
			for _, obj := range objs {
				o := obj.(*v1beta1.ServiceInstance)
				ctx := test.TestContext()
				if o.Namespace != "" && o.Namespace != test.TestNamespace() {
					t.Fatalf("namespace %q", o.Namespace)
				}
				created, err := instances.Create(ctx, o, nil, &metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
				*o = *created.(*v1beta1.ServiceInstance) // resttest compares with objs
				out = append(out, o)
			}
			return out
		})
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// finalizing plays the engine for resttest, which expects a delete to
// remove the object: it finishes every deletion at once.
type finalizing struct{ *instanceStorage }

func (f *finalizing) Delete(ctx context.Context, name string, v rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, _, err := f.instanceStorage.Delete(ctx, name, v, opts)
	if err != nil || (opts != nil && len(opts.DryRun) > 0) {
		return obj, err == nil, err
	}
	id := string(obj.(*v1beta1.ServiceInstance).UID)
	if err := f.store.FinalizeInstance(ctx, id, catalog.EventRecord{Type: "Normal", Reason: "Test"}); err != nil {
		return nil, false, err
	}
	return obj, true, nil
}

func mustID(t *testing.T, s *finalizing, ctx context.Context, name string) string {
	t.Helper()
	obj, err := s.Get(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(obj.(*v1beta1.ServiceInstance).UID)
}
