package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// writeFunc stores an update: old is the object as read, obj as the
// request left it; expect is the resourceVersion the write requires.
type writeFunc func(ctx context.Context, old, obj runtime.Object, id string, expect int64) (runtime.Object, error)

// maxUpdateAttempts bounds the retries of an update that names no
// resourceVersion (a patch, say) when the object changes under it.
const maxUpdateAttempts = 5

// updatedObject applies the request to old. A patch that k8s.io/apiserver
// cannot apply fails with an error that is no Status (strategicpatch's
// "unknown patch type", "list element types are not identical"), or
// panics in strategicpatch (a $deleteFromPrimitiveList or
// $setElementOrder list of objects for a list of strings): both are the
// patch's fault, so both are 400 with what went wrong, not 500.
func updatedObject(ctx context.Context, objInfo rest.UpdatedObjectInfo, old runtime.Object) (obj runtime.Object, err error) {
	info, ok := genericapirequest.RequestInfoFrom(ctx)
	if !ok || info.Verb != "patch" {
		return objInfo.UpdatedObject(ctx, old)
	}
	defer func() {
		if p := recover(); p != nil {
			obj, err = nil, apierrors.NewBadRequest(fmt.Sprintf("the patch cannot be applied: %v", p))
		}
	}()
	obj, err = objInfo.UpdatedObject(ctx, old)
	var status apierrors.APIStatus
	if err != nil && !errors.As(err, &status) && ctx.Err() == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the patch cannot be applied: %v", err))
	}
	return obj, err
}

// update reads the object, applies the request to it (a PUT's object or a
// patch), runs rest.BeforeUpdate and admission, and writes it with the
// resourceVersion check. An update without resourceVersion applies to the
// newest state: a conflict then reads again. A dry run writes as well, in
// a catalog.WithDryRun context: the catalog checks and rolls back.
//
// A server-side apply of a new object (forceAllowCreate) goes to create,
// when the resource has one.
func (st *storage) update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, updateValidation rest.ValidateObjectUpdateFunc,
	strat *strategy, dryRun bool, write writeFunc, create func(ctx context.Context, obj runtime.Object) (runtime.Object, error)) (runtime.Object, bool, error) {
	for attempt := 1; ; attempt++ {
		old, err := st.Get(ctx, name, nil)
		if apierrors.IsNotFound(err) && create != nil {
			obj, err := updatedObject(ctx, objInfo, st.newFn())
			if err != nil {
				return nil, false, err
			}
			out, err := create(ctx, obj)
			return out, err == nil, err
		}
		if err != nil {
			return nil, false, err
		}
		obj, err := updatedObject(ctx, objInfo, old)
		if err != nil {
			return nil, false, err
		}
		expect, err := resourceVersion(obj)
		if err != nil {
			return nil, false, err
		}
		oldRV, _ := resourceVersion(old)
		om, oldMeta := objectMetaOf(obj), objectMetaOf(old)
		// As the generic registry: a uid that is not the object's is a
		// failed precondition; no resourceVersion means the newest.
		if om.UID != "" && om.UID != oldMeta.UID {
			return nil, false, apierrors.NewConflict(st.resource, name,
				fmt.Errorf("precondition failed: uid in the object (%s) is not the stored object's (%s)", om.UID, oldMeta.UID))
		}
		unconditional := expect == 0
		if unconditional {
			expect = oldRV
			om.ResourceVersion = oldMeta.ResourceVersion
		} else if expect != oldRV {
			return nil, false, apierrors.NewConflict(st.resource, name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		if err := rest.BeforeUpdate(strat, ctx, obj, old); err != nil {
			return nil, false, err
		}
		if updateValidation != nil {
			if err := updateValidation(ctx, obj.DeepCopyObject(), old); err != nil {
				return nil, false, err
			}
		}
		wctx := ctx
		if dryRun {
			// The catalog checks and makes the change, then rolls it back:
			// the dry run answers what the update would.
			wctx = catalog.WithDryRun(ctx)
		}
		m, _ := meta.Accessor(old)
		out, err := write(wctx, old, obj, string(m.GetUID()), expect)
		if err != nil {
			if unconditional && attempt < maxUpdateAttempts && catalog.IsStale(err) {
				continue
			}
			return nil, false, st.apiError(err, name, false)
		}
		return st.settled(ctx, out), false, nil
	}
}

// create runs rest.BeforeCreate and admission, then store; a dry run
// runs check instead (the catalog's checks without the write), which
// answers the object as store would make it, with no resourceVersion.
func (st *storage) create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, strat *strategy,
	opts *metav1.CreateOptions, store, check func(ctx context.Context, m catalog.Meta) (runtime.Object, error)) (runtime.Object, error) {
	// As the generic registry does: uid (the catalog's id) and
	// creationTimestamp, then the name from generateName.
	om, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	rest.FillObjectMetaSystemFields(om)
	if om.GetGenerateName() != "" && om.GetName() == "" {
		om.SetName(strat.GenerateName(om.GetGenerateName()))
	}
	if err := rest.BeforeCreate(strat, ctx, obj); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	m, err := catalogMeta(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if opts != nil && isDryRun(opts.DryRun) {
		out, err := check(ctx, m)
		if err != nil {
			return nil, st.apiError(err, om.GetName(), true)
		}
		if om, err := meta.Accessor(out); err == nil {
			om.SetResourceVersion("")
		}
		return out, nil
	}
	out, err := store(ctx, m)
	if err != nil {
		return nil, st.apiError(err, om.GetName(), true)
	}
	return st.settled(ctx, out), nil
}

// remove runs rest.BeforeDelete (preconditions) and admission, then del
// (in a catalog.WithDryRun context for a dry run).
func (st *storage) remove(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, strat *strategy,
	opts *metav1.DeleteOptions, del func(ctx context.Context, obj runtime.Object, id string) (runtime.Object, bool, error)) (runtime.Object, bool, error) {
	obj, err := st.Get(ctx, name, nil)
	if err != nil {
		return nil, false, err
	}
	if opts == nil {
		opts = &metav1.DeleteOptions{}
	}
	if _, _, err := rest.BeforeDelete(strat, ctx, obj, opts); err != nil {
		return nil, false, err
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, obj); err != nil {
			return nil, false, err
		}
	}
	if isDryRun(opts.DryRun) {
		// As an update's: checked and made, then rolled back.
		ctx = catalog.WithDryRun(ctx)
	}
	if p := opts.Preconditions; p != nil && p.ResourceVersion != nil {
		// BeforeDelete checked the object as read; the catalog checks
		// again under the delete's row lock.
		rv, err := resourceVersion(obj)
		if err != nil {
			return nil, false, err
		}
		ctx = catalog.IfUnchanged(ctx, rv)
	}
	m, _ := meta.Accessor(obj)
	out, deleted, err := del(ctx, obj, string(m.GetUID()))
	if err != nil {
		return nil, false, st.apiError(err, name, false)
	}
	return st.settled(ctx, out), deleted, nil
}

// objectMetaOf is obj's metadata, empty for an object of no kind.
func objectMetaOf(obj runtime.Object) *metav1.ObjectMeta {
	if k := kindOf(obj); k != nil {
		om, _, _ := k.parts(obj)
		return om
	}
	return &metav1.ObjectMeta{}
}

// typed converts a typed catalog object to its v1beta1 object.
func typed(kind string, m catalog.Meta, spec, status any) (runtime.Object, error) {
	raw, err := rawOf(m, spec, status)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj, err := fromRaw(kind, raw)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

// instanceStorage is serviceinstances: creation through the catalog's
// validation, spec and metadata updates, and deletion that the engine
// completes.
type instanceStorage struct {
	*storage
	strategy *strategy
}

var (
	_ rest.Creater           = (*instanceStorage)(nil)
	_ rest.Updater           = (*instanceStorage)(nil)
	_ rest.GracefulDeleter   = (*instanceStorage)(nil)
	_ rest.CollectionDeleter = (*instanceStorage)(nil)
)

// Create records a new instance through catalog.CreateInstance.
func (s *instanceStorage) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	instance := func(m catalog.Meta) (*catalog.Instance, error) {
		in := &catalog.Instance{Meta: m}
		if err := convertJSON(&obj.(*v1beta1.ServiceInstance).Spec, &in.Spec); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return in, nil
	}
	return s.create(ctx, obj, createValidation, s.strategy, opts, func(ctx context.Context, m catalog.Meta) (runtime.Object, error) {
		in, err := instance(m)
		if err != nil {
			return nil, err
		}
		out, err := s.store.CreateInstance(ctx, in)
		if err != nil {
			return nil, err
		}
		return typed(catalog.KindInstance, out.Meta, out.Spec, out.Status)
	}, func(ctx context.Context, m catalog.Meta) (runtime.Object, error) {
		in, err := instance(m)
		if err != nil {
			return nil, err
		}
		if err := s.store.CheckInstance(ctx, in); err != nil {
			return nil, err
		}
		return typed(catalog.KindInstance, in.Meta, in.Spec, in.Status)
	})
}

// Update changes an instance's spec (catalog.UpdateInstance, which checks
// plan changes and parameters) or only its metadata.
func (s *instanceStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	create := createOnUpdate(s, forceAllowCreate, createValidation, opts)
	return s.update(ctx, name, objInfo, updateValidation, s.strategy, opts != nil && isDryRun(opts.DryRun),
		func(ctx context.Context, oldObj, obj runtime.Object, id string, expect int64) (runtime.Object, error) {
			o, old := obj.(*v1beta1.ServiceInstance), oldObj.(*v1beta1.ServiceInstance)
			m, err := catalogMeta(o)
			if err != nil {
				return nil, err
			}
			abandon := abandoning(old, o, &m)
			var in *catalog.Instance
			if sameSpec(&o.Spec, &old.Spec) {
				in, err = s.store.UpdateInstanceMeta(ctx, id, expect, func(cm *catalog.Meta) error { setMeta(cm, m); return nil })
			} else {
				var spec catalog.InstanceSpec
				if err := convertJSON(&o.Spec, &spec); err != nil {
					return nil, err
				}
				in, err = s.store.UpdateInstance(ctx, id, expect, func(in *catalog.Instance) error {
					setMeta(&in.Meta, m)
					in.Spec = spec
					return nil
				})
			}
			if err == nil && abandon {
				in, err = s.store.AbandonInstance(ctx, id, requester(ctx))
			}
			if err != nil {
				return nil, err
			}
			return typed(catalog.KindInstance, in.Meta, in.Spec, in.Status)
		}, create)
}

// Delete marks the instance for deletion (catalog.DeleteInstance); the
// engine deprovisions it and removes it, which watchers see as DELETED.
//
// An instance's bindings are its dependents, and the propagation policy
// says what becomes of them, as Kubernetes users know it: Background (or
// none), Service Catalog's way, waits for them to be deleted before
// deprovisioning; Foreground deletes them first (catalog.CascadeAnnotation);
// Orphan would leave them without their instance, which no broker can
// serve, so it is refused while there are any, saying what to do instead.
func (s *instanceStorage) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return s.remove(ctx, name, deleteValidation, s.strategy, opts, func(ctx context.Context, _ runtime.Object, id string) (runtime.Object, bool, error) {
		del := s.store.DeleteInstance
		switch propagation(opts) {
		case metav1.DeletePropagationOrphan:
			if err := s.refuseOrphans(ctx, name, id); err != nil {
				return nil, false, err
			}
		case metav1.DeletePropagationForeground:
			del = s.store.DeleteInstanceCascading
		}
		in, err := del(ctx, id)
		if err != nil {
			return nil, false, err
		}
		out, err := typed(catalog.KindInstance, in.Meta, in.Spec, in.Status)
		return out, false, err
	})
}

// propagation is the delete's propagation policy, from the deprecated
// orphanDependents too; "" when it gives none.
func propagation(opts *metav1.DeleteOptions) metav1.DeletionPropagation {
	switch {
	case opts == nil:
		return ""
	case opts.PropagationPolicy != nil:
		return *opts.PropagationPolicy
	//lint:ignore SA1019 clients may still send it, and Kubernetes still honours it
	case opts.OrphanDependents != nil && *opts.OrphanDependents:
		return metav1.DeletePropagationOrphan
	}
	return ""
}

// refuseOrphans answers 409 when the instance has bindings that are not
// being deleted: an orphaning delete would leave them without it.
func (s *instanceStorage) refuseOrphans(ctx context.Context, name, id string) error {
	bindings, err := s.store.BindingsOf(ctx, id)
	if err != nil {
		return err
	}
	var live []string
	for _, b := range bindings {
		if b.DeletionTimestamp == nil {
			live = append(live, b.Name)
		}
	}
	if len(live) == 0 {
		return nil
	}
	msg := fmt.Sprintf("its bindings (%s) would be left without their instance: delete them first, "+
		"or delete with propagationPolicy Foreground (kubectl delete --cascade=foreground) to delete them with it", strings.Join(live, ", "))
	gk := s.groupKind()
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		Details: &metav1.StatusDetails{Group: gk.Group, Kind: gk.Kind, Name: name, Causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeFieldValueNotSupported, Field: "propagationPolicy", Message: msg}}},
		Message: fmt.Sprintf("%s %q cannot be deleted with propagationPolicy Orphan: %s", gk.Kind, name, msg),
	}}
}

// DeleteCollection marks every instance the selectors match for deletion,
// each as Delete does.
func (s *instanceStorage) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions,
	listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	return s.deleteCollection(ctx, listOptions, func(ctx context.Context, name string) (runtime.Object, error) {
		obj, _, err := s.Delete(ctx, name, deleteValidation, opts)
		return obj, err
	})
}

// bindingStorage is servicebindings: creation through the catalog, metadata
// updates (the spec is immutable), and deletion that the engine completes.
type bindingStorage struct {
	*storage
	strategy *strategy
}

var (
	_ rest.Creater           = (*bindingStorage)(nil)
	_ rest.Updater           = (*bindingStorage)(nil)
	_ rest.GracefulDeleter   = (*bindingStorage)(nil)
	_ rest.CollectionDeleter = (*bindingStorage)(nil)
)

// Create records a new binding through catalog.CreateBinding.
func (s *bindingStorage) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	binding := func(m catalog.Meta) (*catalog.Binding, error) {
		b := &catalog.Binding{Meta: m}
		if err := convertJSON(&obj.(*v1beta1.ServiceBinding).Spec, &b.Spec); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return b, nil
	}
	return s.create(ctx, obj, createValidation, s.strategy, opts, func(ctx context.Context, m catalog.Meta) (runtime.Object, error) {
		b, err := binding(m)
		if err != nil {
			return nil, err
		}
		out, err := s.store.CreateBinding(ctx, b)
		if err != nil {
			return nil, err
		}
		return typed(catalog.KindBinding, out.Meta, out.Spec, out.Status)
	}, func(ctx context.Context, m catalog.Meta) (runtime.Object, error) {
		b, err := binding(m)
		if err != nil {
			return nil, err
		}
		if err := s.store.CheckBinding(ctx, b); err != nil {
			return nil, err
		}
		return typed(catalog.KindBinding, b.Meta, b.Spec, b.Status)
	})
}

// Update changes a binding's metadata.
func (s *bindingStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	create := createOnUpdate(s, forceAllowCreate, createValidation, opts)
	return s.update(ctx, name, objInfo, updateValidation, s.strategy, opts != nil && isDryRun(opts.DryRun),
		func(ctx context.Context, old, obj runtime.Object, id string, expect int64) (runtime.Object, error) {
			m, err := catalogMeta(obj)
			if err != nil {
				return nil, err
			}
			abandon := abandoning(old, obj, &m)
			b, err := s.store.UpdateBindingMeta(ctx, id, expect, func(cm *catalog.Meta) error { setMeta(cm, m); return nil })
			if err == nil && abandon {
				b, err = s.store.AbandonBinding(ctx, id, requester(ctx))
			}
			if err != nil {
				return nil, err
			}
			return typed(catalog.KindBinding, b.Meta, b.Spec, b.Status)
		}, create)
}

// Delete marks the binding for deletion (catalog.DeleteBinding).
func (s *bindingStorage) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return s.remove(ctx, name, deleteValidation, s.strategy, opts, func(ctx context.Context, _ runtime.Object, id string) (runtime.Object, bool, error) {
		b, err := s.store.DeleteBinding(ctx, id)
		if err != nil {
			return nil, false, err
		}
		out, err := typed(catalog.KindBinding, b.Meta, b.Spec, b.Status)
		return out, false, err
	})
}

// DeleteCollection marks every binding the selectors match for deletion,
// each as Delete does.
func (s *bindingStorage) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions,
	listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	return s.deleteCollection(ctx, listOptions, func(ctx context.Context, name string) (runtime.Object, error) {
		obj, _, err := s.Delete(ctx, name, deleteValidation, opts)
		return obj, err
	})
}

// readOnlyStatus is the status subresource of a kind whose status only the
// catalog writes: it reads the object. It holds the resource's storage by
// name rather than embedding it: a subresource is read and written by name
// only, and k8s.io/apiserver would serve the storage's List on GET of the
// subresource's path.
type readOnlyStatus struct{ st *storage }

var (
	_ rest.Getter         = (*readOnlyStatus)(nil)
	_ rest.TableConvertor = (*readOnlyStatus)(nil)
)

// New returns an empty object of the resource.
func (s *readOnlyStatus) New() runtime.Object { return s.st.New() }

// Destroy has nothing to release.
func (s *readOnlyStatus) Destroy() {}

// Get reads the object.
func (s *readOnlyStatus) Get(ctx context.Context, name string, opts *metav1.GetOptions) (runtime.Object, error) {
	return s.st.Get(ctx, name, opts)
}

// ConvertToTable gives kubectl its columns.
func (s *readOnlyStatus) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return s.st.ConvertToTable(ctx, obj, opts)
}

// statusStorage is the status subresource of instances and bindings: read
// as readOnlyStatus, and written.
type statusStorage struct {
	readOnlyStatus
	strategy *strategy
}

var _ rest.Updater = (*statusStorage)(nil)

// Update replaces the status, and nothing else, with the resourceVersion
// check.
func (s *statusStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, _ rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return s.st.update(ctx, name, objInfo, updateValidation, s.strategy, opts != nil && isDryRun(opts.DryRun),
		func(ctx context.Context, _, obj runtime.Object, id string, expect int64) (runtime.Object, error) {
			if k := kindOf(obj); k != nil && k.updateStatus != nil {
				return k.updateStatus(ctx, s.st.store, obj, id, expect)
			}
			return nil, apierrors.NewBadRequest("no status subresource")
		}, nil)
}

// brokerStorage is clusterservicebrokers and servicebrokers: registration
// and deregistration through the catalog, which fetches the broker's
// catalog (a ServiceBroker's into its namespace).
type brokerStorage struct {
	*storage
	strategy *strategy
	// relist fetches a new broker's catalog in the background, so that
	// the create answers at once.
	relist func(id string)
}

var (
	_ rest.Creater         = (*brokerStorage)(nil)
	_ rest.Updater         = (*brokerStorage)(nil)
	_ rest.GracefulDeleter = (*brokerStorage)(nil)
)

// updateInstanceStatus replaces an instance's status in the catalog.
func updateInstanceStatus(ctx context.Context, store *catalog.Store, obj runtime.Object, id string, expect int64) (runtime.Object, error) {
	var status catalog.InstanceStatus
	if err := convertJSON(&obj.(*v1beta1.ServiceInstance).Status, &status); err != nil {
		return nil, err
	}
	in, err := store.UpdateInstanceStatusAt(ctx, id, expect, func(in *catalog.Instance) error { in.Status = status; return nil })
	if err != nil {
		return nil, err
	}
	return typed(catalog.KindInstance, in.Meta, in.Spec, in.Status)
}

// updateBindingStatus replaces a binding's status in the catalog.
func updateBindingStatus(ctx context.Context, store *catalog.Store, obj runtime.Object, id string, expect int64) (runtime.Object, error) {
	var status catalog.BindingStatus
	if err := convertJSON(&obj.(*v1beta1.ServiceBinding).Status, &status); err != nil {
		return nil, err
	}
	b, err := store.UpdateBindingStatusAt(ctx, id, expect, func(b *catalog.Binding) error { b.Status = status; return nil })
	if err != nil {
		return nil, err
	}
	return typed(catalog.KindBinding, b.Meta, b.Spec, b.Status)
}

// brokerSpecOf is the spec of a broker of either kind, as the catalog has
// it.
func brokerSpecOf(obj runtime.Object) (catalog.BrokerSpec, error) {
	if k := kindOf(obj); k != nil && k.brokerSpec != nil {
		return k.brokerSpec(obj)
	}
	return catalog.BrokerSpec{}, fmt.Errorf("%T is not a broker", obj)
}

// Create registers a broker (catalog.CreateBroker) and fetches its catalog.
func (s *brokerStorage) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	return s.create(ctx, obj, createValidation, s.strategy, opts, func(ctx context.Context, m catalog.Meta) (runtime.Object, error) {
		spec, err := brokerSpecOf(obj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		b, err := s.store.CreateBroker(ctx, &catalog.Broker{Meta: m, Spec: spec}, nil)
		if err != nil {
			return nil, err
		}
		s.relist(b.ID)
		return typed(s.kind, b.Meta, b.Spec, b.Status)
	}, func(ctx context.Context, m catalog.Meta) (runtime.Object, error) {
		spec, err := brokerSpecOf(obj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		b, err := s.store.CheckBroker(ctx, &catalog.Broker{Meta: m, Spec: spec})
		if err != nil {
			return nil, err
		}
		return typed(s.kind, b.Meta, b.Spec, b.Status)
	})
}

// Update changes a broker's metadata and spec (catalog.UpdateBroker, which
// relists when the spec changes).
func (s *brokerStorage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	create := createOnUpdate(s, forceAllowCreate, createValidation, opts)
	return s.update(ctx, name, objInfo, updateValidation, s.strategy, opts != nil && isDryRun(opts.DryRun),
		func(ctx context.Context, _, obj runtime.Object, id string, expect int64) (runtime.Object, error) {
			m, err := catalogMeta(obj)
			if err != nil {
				return nil, err
			}
			spec, err := brokerSpecOf(obj)
			if err != nil {
				return nil, err
			}
			b, err := s.store.UpdateBroker(ctx, id, expect, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
				setMeta(&b.Meta, m)
				if spec.SecretRef() == nil && b.Spec.SecretRef() == nil {
					// Credentials sealed in the catalog (registered through
					// the REST API) are not this API's to change.
					spec.AuthInfo = b.Spec.AuthInfo
				}
				// The REST API keeps a relist duration as it was given
				// ("15m"), this API as Go prints it ("15m0s"): the same
				// duration is no change of the spec.
				if d, err := time.ParseDuration(b.Spec.RelistDuration); err == nil && d.String() == spec.RelistDuration {
					spec.RelistDuration = b.Spec.RelistDuration
				}
				b.Spec = spec
				return nil, nil
			})
			if err != nil {
				return nil, err
			}
			return typed(s.kind, b.Meta, b.Spec, b.Status)
		}, create)
}

// Delete deregisters the broker with its classes and plans, at once.
func (s *brokerStorage) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, deleted, err := s.remove(ctx, name, deleteValidation, s.strategy, opts, func(ctx context.Context, obj runtime.Object, id string) (runtime.Object, bool, error) {
		if err := s.store.DeleteBroker(ctx, id); err != nil {
			return nil, false, err
		}
		return obj, true, nil
	})
	// A dry run says what the delete would do: remove it at once.
	if err == nil && opts != nil && isDryRun(opts.DryRun) {
		deleted = true
	}
	return obj, deleted, err
}

// createOptions carries an update's dry run and field manager over to the
// create a server-side apply of a new object becomes.
// createOnUpdate is how an update creates the object it did not find: by
// c's Create, when the resource allows create on update; nil otherwise.
func createOnUpdate(c rest.Creater, allowed bool, createValidation rest.ValidateObjectFunc, opts *metav1.UpdateOptions) func(context.Context, runtime.Object) (runtime.Object, error) {
	if !allowed {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
		return c.Create(ctx, obj, createValidation, createOptions(opts))
	}
}

func createOptions(opts *metav1.UpdateOptions) *metav1.CreateOptions {
	if opts == nil {
		return &metav1.CreateOptions{}
	}
	return &metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager}
}

// deleteCollection is DeleteCollection for a kind whose storage deletes
// one object with del: it lists what the selectors match (in the request's
// namespace, or all of them) and deletes each object through del, the
// same path as a single delete, so the engine completes each deletion as
// usual. An object gone meanwhile is skipped; the first other error ends
// it. It returns the objects as the deletes left them, in the list's
// metadata.
//
// The list is the one the options ask for, as kube-apiserver reads it:
// with a limit, one page (and its continue token), from the continue
// token given; without, every match.
func (st *storage) deleteCollection(ctx context.Context, listOptions *metainternalversion.ListOptions,
	del func(ctx context.Context, name string) (runtime.Object, error)) (runtime.Object, error) {
	listed, err := st.List(ctx, listOptions)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(listed)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		m, err := meta.Accessor(item)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		ictx := ctx
		if st.namespaced {
			ictx = genericapirequest.WithNamespace(ctx, m.GetNamespace())
		}
		obj, err := del(ictx, m.GetName())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	if err := meta.SetList(listed, out); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return listed, nil
}
