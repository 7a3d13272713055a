package apiserver

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/registry/rest/resttest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

func validBinding() *v1beta1.ServiceBinding {
	return &v1beta1.ServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "foo"},
		Spec:       v1beta1.ServiceBindingSpec{InstanceRef: v1beta1.LocalObjectReference{Name: "db"}},
	}
}

// finalizingBinding is finalizing for bindings.
type finalizingBinding struct{ *bindingStorage }

func (f *finalizingBinding) Delete(ctx context.Context, name string, v rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, _, err := f.bindingStorage.Delete(ctx, name, v, opts)
	if err != nil || (opts != nil && len(opts.DryRun) > 0) {
		return obj, err == nil, err
	}
	id := string(obj.(*v1beta1.ServiceBinding).UID)
	if err := f.store.FinalizeBinding(ctx, id, catalog.EventRecord{Type: "Normal", Reason: "Test"}); err != nil {
		return nil, false, err
	}
	return obj, true, nil
}

// TestRESTConformanceBinding runs resttest against the ServiceBinding
// storage. Bindings refer to an instance "db", made in every namespace
// resttest uses.
func TestRESTConformanceBinding(t *testing.T) {
	t.Parallel()
	var bindings *finalizingBinding
	var store *catalog.Store
	fresh := func(t *testing.T) {
		var storages map[string]rest.Storage
		storages, store = storagesForTest(t)
		bindings = &finalizingBinding{bindingStorage: storages["servicebindings"].(*bindingStorage)}
		instances := storages["serviceinstances"].(*instanceStorage)
		for _, ns := range []string{"test", "bar1", "bar2", "bar3", "bar4"} {
			in := validInstance()
			in.Name = "db"
			ctx := genericapirequest.WithNamespace(genericapirequest.NewContext(), ns)
			if _, err := instances.Create(ctx, in, nil, &metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	createFn := func(ctx context.Context, obj runtime.Object) error {
		_, err := bindings.Create(ctx, obj, nil, &metav1.CreateOptions{})
		return err
	}
	getFn := func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
		return bindings.Get(ctx, obj.(*v1beta1.ServiceBinding).Name, &metav1.GetOptions{})
	}
	// An instance not created yet is valid (the binding waits for it); a
	// name no instance can have is not.
	invalid := validBinding()
	invalid.Spec.InstanceRef.Name = "No Such Instance"

	t.Run("create", func(t *testing.T) {
		// As for instances: a dry run cannot equal the create after it,
		// which gets a spec.externalID of its own.
		resttestAllBut(t, "testCreateDryRunEquals", func(t *testing.T) {
			fresh(t)
			resttest.New(t, bindings).TestCreate(validBinding(), createFn, getFn, invalid)
		})
	})
	t.Run("update", func(t *testing.T) {
		fresh(t)
		resttest.New(t, bindings).TestUpdate(validBinding(), createFn, getFn,
			func(obj runtime.Object) runtime.Object {
				o := obj.(*v1beta1.ServiceBinding)
				o.Labels = map[string]string{"changed": "yes"}
				return o
			},
			func(obj runtime.Object) runtime.Object {
				// The spec is immutable.
				o := obj.(*v1beta1.ServiceBinding)
				o.Spec.SecretName = "other"
				return o
			})
	})
	t.Run("get", func(t *testing.T) {
		fresh(t)
		resttest.New(t, bindings).TestGet(validBinding())
	})
	t.Run("delete", func(t *testing.T) {
		// As for instances: testDeleteWithUID creates its object with uid
		// "UID0000", where the uid is the catalog's id.
		resttestAllBut(t, "testDeleteWithUID", func(t *testing.T) {
			fresh(t)
			resttest.New(t, bindings).ReturnDeletedObject().TestDelete(validBinding(), clearingLeftover(bindings, createFn), getFn, apierrors.IsNotFound)
		})
	})
	t.Run("watch", func(t *testing.T) {
		fresh(t)
		test := resttest.New(t, bindings)
		ensure := func(ctx context.Context, obj runtime.Object, present bool) error {
			name := obj.(*v1beta1.ServiceBinding).Name
			_, err := bindings.Get(ctx, name, nil)
			switch {
			case err == nil && !present:
				_, _, err = bindings.Delete(ctx, name, nil, nil)
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
				got, err := bindings.Get(ctx, obj.(*v1beta1.ServiceBinding).Name, nil)
				if err != nil {
					return err
				}
				_, err = store.UpdateBindingStatus(ctx, string(got.(*v1beta1.ServiceBinding).UID), func(b *catalog.Binding) error {
					b.Status.OperationStartTime = ptrTo(time.Now())
					return nil
				}, nil)
				return err
			case "DELETED":
				if err := ensure(ctx, obj, true); err != nil {
					return err
				}
				return ensure(ctx, obj, false)
			}
			return nil
		}
		valid := validBinding()
		valid.Labels = map[string]string{"app": "db"}
		test.TestWatch(valid, emit,
			[]labels.Set{{"app": "db"}}, []labels.Set{{"app": "other"}},
			[]fields.Set{{"metadata.name": "foo"}, {"spec.instanceRef.name": "db"}},
			[]fields.Set{{"metadata.name": "bar"}},
			[]string{"ADDED", "MODIFIED", "DELETED"})
	})
	t.Run("list", func(t *testing.T) {
		fresh(t)
		test := resttest.New(t, bindings)
		test.TestList(validBinding(), func(objs []runtime.Object) []runtime.Object {
			ctx := context.Background()
			all, err := store.ListBindings(ctx, catalog.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range all.Items {
				if _, err := store.DeleteBinding(ctx, b.ID); err != nil {
					t.Fatal(err)
				}
				if err := store.FinalizeBinding(ctx, b.ID, catalog.EventRecord{Type: "Normal", Reason: "Test"}); err != nil {
					t.Fatal(err)
				}
			}
			out := make([]runtime.Object, 0, len(objs))
			for _, obj := range objs {
				o := obj.(*v1beta1.ServiceBinding)
				created, err := bindings.Create(test.TestContext(), o, nil, &metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				*o = *created.(*v1beta1.ServiceBinding)
				out = append(out, o)
			}
			return out
		})
	})
}

func ptrTo[T any](v T) *T { return &v }

// brokerWorld plays a broker's catalog for the read-only classes and plans:
// an object is "created" by adding a service (or plan) of that name to the
// fake broker's catalog and relisting, and "deleted" by deregistering the
// broker (the only way the catalog deletes classes and plans) and
// registering it again.
type brokerWorld struct {
	t        *testing.T
	store    *catalog.Store
	fake     *osbtest.Broker
	brokerID string
	services []osbtest.Service
	// plan: the objects are plans, each in a service of its own.
	plan bool
}

func (w *brokerWorld) serviceFor(name, description string) osbtest.Service {
	if w.plan {
		return osbtest.Service{ID: name + "-s", Name: name + "-s", Description: "d", Bindable: true,
			Plans: []osbtest.Plan{{ID: name, Name: name, Description: description}}}
	}
	return osbtest.Service{ID: name, Name: name, Description: description, Bindable: true,
		Plans: []osbtest.Plan{{ID: name + "-p", Name: "p", Description: "d"}}}
}

func (w *brokerWorld) relist(ctx context.Context) error {
	w.fake.SetCatalog(w.services)
	_, err := w.store.Relist(ctx, w.brokerID)
	return err
}

// put adds or changes the object's service.
func (w *brokerWorld) put(ctx context.Context, name, description string) error {
	svc := w.serviceFor(name, description)
	i := slices.IndexFunc(w.services, func(s osbtest.Service) bool { return s.ID == svc.ID })
	if i < 0 {
		w.services = append(w.services, svc)
	} else {
		w.services[i] = svc
	}
	return w.relist(ctx)
}

// reset deregisters the broker and registers it again with these
// services.
func (w *brokerWorld) reset(ctx context.Context, services []osbtest.Service) error {
	if err := w.store.DeleteBroker(ctx, w.brokerID); err != nil {
		return err
	}
	b := &catalog.Broker{Spec: catalog.BrokerSpec{URL: w.fake.URL()}}
	b.Name = "fake"
	b, err := w.store.CreateBroker(ctx, b, nil)
	if err != nil {
		return err
	}
	w.brokerID, w.services = b.ID, services
	return w.relist(ctx)
}

// remove deletes the object: a reset without its service.
func (w *brokerWorld) remove(ctx context.Context, name string) error {
	id := w.serviceFor(name, "").ID
	return w.reset(ctx, slices.DeleteFunc(slices.Clone(w.services), func(s osbtest.Service) bool { return s.ID == id }))
}

// readOnly gives a read-only storage the Creater resttest makes its
// objects with: brokerWorld.put, then Get.
type readOnly struct {
	*storage
	world *brokerWorld
}

func (r *readOnly) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	name := objectMetaOf(obj).Name
	if err := r.world.put(ctx, name, "d"); err != nil {
		return nil, err
	}
	return r.Get(ctx, name, nil)
}

// TestRESTConformanceReadOnly runs resttest's get, list and watch against
// the ClusterServiceClass and ClusterServicePlan storages, which the
// catalog fills from brokers' catalogs. Create, update and delete do not
// apply: the API does not offer them.
func TestRESTConformanceReadOnly(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"clusterserviceclasses", "clusterserviceplans"} {
		valid := func() runtime.Object {
			if kind == "clusterserviceplans" {
				return &v1beta1.ClusterServicePlan{ObjectMeta: metav1.ObjectMeta{Name: "foo"}}
			}
			return &v1beta1.ClusterServiceClass{ObjectMeta: metav1.ObjectMeta{Name: "foo"}}
		}
		fresh := func(t *testing.T) (*readOnly, *brokerWorld) {
			storages, store, fake, id := storagesWithBroker(t)
			w := &brokerWorld{t: t, store: store, fake: fake, brokerID: id, services: fake.Catalog(), plan: kind == "clusterserviceplans"}
			return &readOnly{storage: storages[kind].(*storage), world: w}, w
		}
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			t.Run("get", func(t *testing.T) {
				st, _ := fresh(t)
				resttest.New(t, st).ClusterScope().TestGet(valid())
			})
			t.Run("list", func(t *testing.T) {
				st, w := fresh(t)
				test := resttest.New(t, st).ClusterScope()
				test.TestList(valid(), func(objs []runtime.Object) []runtime.Object {
					ctx := context.Background()
					var services []osbtest.Service
					for _, obj := range objs {
						services = append(services, w.serviceFor(objectMetaOf(obj).Name, "d"))
					}
					if err := w.reset(ctx, services); err != nil {
						t.Fatal(err)
					}
					out := make([]runtime.Object, 0, len(objs))
					for _, obj := range objs {
						// The catalog gives classes and plans no labels:
						// put resttest's on the row.
						om := objectMetaOf(obj)
						if len(om.Labels) > 0 {
							table := "catalog.service_classes"
							if w.plan {
								table = "catalog.service_plans"
							}
							if _, err := poolOf(w.store).Exec(ctx, `UPDATE `+table+` SET metadata = jsonb_set(metadata, '{labels}', $2) WHERE name = $1`,
								om.Name, om.Labels); err != nil {
								t.Fatal(err)
							}
						}
						got, err := st.Get(ctx, om.Name, nil)
						if err != nil {
							t.Fatal(err)
						}
						// resttest compares with objs.
						switch o := obj.(type) {
						case *v1beta1.ClusterServiceClass:
							*o = *got.(*v1beta1.ClusterServiceClass)
						case *v1beta1.ClusterServicePlan:
							*o = *got.(*v1beta1.ClusterServicePlan)
						}
						out = append(out, obj)
					}
					return out
				})
			})
			t.Run("watch", func(t *testing.T) {
				st, w := fresh(t)
				test := resttest.New(t, st).ClusterScope()
				n := 0
				emit := func(obj runtime.Object, action string) error {
					ctx := test.TestContext()
					name := objectMetaOf(obj).Name
					_, err := st.Get(ctx, name, nil)
					exists := err == nil
					if err != nil && !apierrors.IsNotFound(err) {
						return err
					}
					switch action {
					case "ADDED":
						if exists {
							if err := w.remove(ctx, name); err != nil {
								return err
							}
						}
						return w.put(ctx, name, "d")
					case "MODIFIED":
						if !exists {
							if err := w.put(ctx, name, "d"); err != nil {
								return err
							}
						}
						n++
						return w.put(ctx, name, "changed "+strconv.Itoa(n))
					case "DELETED":
						if !exists {
							if err := w.put(ctx, name, "d"); err != nil {
								return err
							}
						}
						return w.remove(ctx, name)
					}
					return nil
				}
				pass := []fields.Set{{"metadata.name": "foo"}}
				if w.plan {
					pass = append(pass, fields.Set{"spec.externalName": "foo"})
				} else {
					pass = append(pass, fields.Set{"spec.externalName": "foo"})
				}
				test.TestWatch(valid(), emit,
					[]labels.Set{{}}, []labels.Set{{"app": "other"}},
					pass, []fields.Set{{"metadata.name": "bar"}},
					[]string{"ADDED", "MODIFIED", "DELETED"})
			})
		})
	}
}

// TestRESTConformanceBroker runs resttest against the ClusterServiceBroker
// storage.
func TestRESTConformanceBroker(t *testing.T) {
	t.Parallel()
	restConformanceBroker(t, "clusterservicebrokers", false, func(o *v1beta1.ClusterServiceBroker) *v1beta1.CommonServiceBrokerSpec {
		return &o.Spec.CommonServiceBrokerSpec
	})
}

// TestRESTConformanceServiceBroker runs resttest against the ServiceBroker
// storage, namespaced: resttest checks besides that an object lives in its
// namespace only.
func TestRESTConformanceServiceBroker(t *testing.T) {
	t.Parallel()
	restConformanceBroker(t, "servicebrokers", true, func(o *v1beta1.ServiceBroker) *v1beta1.CommonServiceBrokerSpec {
		return &o.Spec.CommonServiceBrokerSpec
	})
}

// restConformanceBroker runs resttest against the storage of a broker
// kind, cluster-scoped or namespaced; spec reaches the object's spec.
func restConformanceBroker[T any, P interface {
	*T
	runtime.Object
	metav1.Object
}](t *testing.T, resource string, namespaced bool, spec func(P) *v1beta1.CommonServiceBrokerSpec) {
	var brokers *brokerStorage
	var url string
	fresh := func(t *testing.T) {
		storages, _, fake, _ := storagesWithBroker(t)
		brokers = storages[resource].(*brokerStorage)
		// A new broker's catalog is fetched in the background, which
		// changes the broker (its status) between resttest's steps, and
		// resttest expects what it wrote to stay as it was: no relist.
		brokers.relist = func(string) {}
		url = fake.URL()
	}
	valid := func() P {
		o := P(new(T))
		o.SetName("foo")
		spec(o).URL = url
		return o
	}
	tester := func(t *testing.T) *resttest.Tester {
		test := resttest.New(t, brokers)
		if !namespaced {
			test = test.ClusterScope()
		}
		return test
	}
	createFn := func(ctx context.Context, obj runtime.Object) error {
		_, err := brokers.Create(ctx, obj, nil, &metav1.CreateOptions{})
		return err
	}
	getFn := func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
		return brokers.Get(ctx, obj.(P).GetName(), &metav1.GetOptions{})
	}
	t.Run("create", func(t *testing.T) {
		// The whole of it: a dry run answers the broker as the create
		// makes it (a broker has no externalID of its own).
		fresh(t)
		invalid := valid()
		spec(invalid).URL = ""
		tester(t).TestCreate(valid(), createFn, getFn, invalid)
	})
	t.Run("update", func(t *testing.T) {
		fresh(t)
		tester(t).TestUpdate(valid(), createFn, getFn,
			func(obj runtime.Object) runtime.Object {
				o := obj.(P)
				o.SetLabels(map[string]string{"changed": "yes"})
				return o
			},
			func(obj runtime.Object) runtime.Object {
				o := obj.(P)
				spec(o).URL = ""
				return o
			})
	})
	t.Run("get", func(t *testing.T) {
		fresh(t)
		tester(t).TestGet(valid())
	})
	t.Run("delete", func(t *testing.T) {
		// testDeleteWithUID creates its object with uid "UID0000", where
		// the uid is the catalog's id.
		resttestAllBut(t, "testDeleteWithUID", func(t *testing.T) {
			fresh(t)
			tester(t).ReturnDeletedObject().TestDelete(valid(), clearingLeftover(brokers, createFn), getFn, apierrors.IsNotFound)
		})
	})
	t.Run("watch", func(t *testing.T) {
		fresh(t)
		test := tester(t)
		ensure := func(ctx context.Context, obj runtime.Object, present bool) error {
			name := obj.(P).GetName()
			_, err := brokers.Get(ctx, name, nil)
			switch {
			case err == nil && !present:
				_, _, err = brokers.Delete(ctx, name, nil, nil)
				return err
			case apierrors.IsNotFound(err) && present:
				return createFn(ctx, obj.DeepCopyObject())
			case apierrors.IsNotFound(err):
				return nil
			}
			return err
		}
		n := 0
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
				got, err := brokers.Get(ctx, obj.(P).GetName(), nil)
				if err != nil {
					return err
				}
				o := got.(P)
				n++
				o.SetAnnotations(map[string]string{"n": strconv.Itoa(n)})
				_, _, err = brokers.Update(ctx, o.GetName(), rest.DefaultUpdatedObjectInfo(o), nil, nil, false, &metav1.UpdateOptions{})
				return err
			case "DELETED":
				if err := ensure(ctx, obj, true); err != nil {
					return err
				}
				return ensure(ctx, obj, false)
			}
			return nil
		}
		v := valid()
		v.SetLabels(map[string]string{"app": "db"})
		test.TestWatch(v, emit,
			[]labels.Set{{"app": "db"}}, []labels.Set{{"app": "other"}},
			[]fields.Set{{"metadata.name": "foo"}}, []fields.Set{{"metadata.name": "bar"}},
			[]string{"ADDED", "MODIFIED", "DELETED"})
	})
	t.Run("list", func(t *testing.T) {
		fresh(t)
		test := tester(t)
		test.TestList(valid(), func(objs []runtime.Object) []runtime.Object {
			ctx := context.Background()
			all, err := brokers.store.ListBrokers(ctx, catalog.ListOptions{Namespaced: namespaced})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range all.Items {
				if err := brokers.store.DeleteBroker(ctx, b.ID); err != nil {
					t.Fatal(err)
				}
			}
			for _, obj := range objs {
				if _, err := brokers.Create(test.TestContext(), obj, nil, &metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, obj := range objs {
				o := obj.(P)
				got, err := brokers.Get(test.TestContext(), o.GetName(), nil)
				if err != nil {
					t.Fatal(err)
				}
				*o = *got.(P)
			}
			return objs
		})
	})
}
