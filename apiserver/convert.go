package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/bindery-dev/bindery/apis/servicecatalog/v1beta1"
	"github.com/bindery-dev/bindery/catalog"
)

// Finalizer is on every ServiceInstance and ServiceBinding the API shows:
// the engine's work between a delete (deletionTimestamp) and the removal of
// the row. It is Service Catalog's own, so that its clients find it where
// they look (svcat deprovision --abandon removes it). It is not stored: the
// API adds it on the way out while the engine has work to do, and drops it
// on the way in. A client that removes it abandons the object
// (catalog.AbandonAnnotation): its deletion will not call the broker, as
// Service Catalog's controller did not once its finalizer was gone.
const Finalizer = "kubernetes-incubator/service-catalog"

// formerFinalizer is the name Bindery's finalizer had before it took
// Service Catalog's: a client that read it then may still send it, and it
// is Bindery's, not one to keep.
const formerFinalizer = "servicecatalog.k8s.io/bindery"

// Conversion between catalog objects and servicecatalog.k8s.io/v1beta1.
// Spec and status are field-compatible JSON (v1beta1's roundtrip_test.go
// proves it), so they go through JSON; metadata maps field by field, and
// what the catalog has no column for (ownerReferences, managedFields,
// generateName, deletionGracePeriodSeconds) is kept in Meta.Extra as an
// ObjectMeta document holding only those fields.

// objectMeta builds a Kubernetes ObjectMeta from a catalog Meta.
func objectMeta(m *catalog.Meta, finalizer bool) (metav1.ObjectMeta, error) {
	var om metav1.ObjectMeta
	if len(m.Extra) > 0 {
		if err := jsonv1.Unmarshal(m.Extra, &om); err != nil {
			return om, fmt.Errorf("decode metadata of %s: %w", m.ID, err)
		}
	}
	om.Name, om.Namespace, om.UID = m.Name, m.Namespace, types.UID(m.ID)
	om.Labels, om.Annotations = m.Labels, m.Annotations
	om.Finalizers = slices.Clone(m.Finalizers)
	if finalizer && !slices.Contains(om.Finalizers, Finalizer) {
		om.Finalizers = append(om.Finalizers, Finalizer)
	}
	om.Generation = m.Generation
	om.ResourceVersion = strconv.FormatInt(m.ResourceVersion, 10)
	// PostgreSQL keeps microseconds: an object just written must read the
	// same as when read back.
	om.CreationTimestamp = metav1.NewTime(m.CreationTimestamp.Truncate(time.Microsecond))
	if m.DeletionTimestamp != nil {
		t := metav1.NewTime(m.DeletionTimestamp.Truncate(time.Microsecond))
		om.DeletionTimestamp = &t
	}
	return om, nil
}

// catalogMeta builds a catalog Meta from a Kubernetes object's metadata.
// The catalog sets generation, resourceVersion and the timestamps itself,
// and Service Catalog's labels from the spec.
func catalogMeta(obj runtime.Object) (catalog.Meta, error) {
	om := objectMetaOf(obj)
	m := catalog.Meta{
		ID: string(om.UID), Name: om.Name, Namespace: om.Namespace,
		Labels: om.Labels, Annotations: om.Annotations,
		Finalizers: slices.DeleteFunc(slices.Clone(om.Finalizers), func(f string) bool { return f == Finalizer || f == formerFinalizer }),
	}
	if len(m.Finalizers) == 0 {
		m.Finalizers = nil
	}
	extra := metav1.ObjectMeta{
		GenerateName:               om.GenerateName,
		DeletionGracePeriodSeconds: om.DeletionGracePeriodSeconds,
		OwnerReferences:            om.OwnerReferences,
		ManagedFields:              om.ManagedFields,
	}
	raw, err := json.Marshal(&extra)
	if err != nil {
		return m, fmt.Errorf("encode metadata of %s: %w", om.Name, err)
	}
	if string(raw) != `{"creationTimestamp":null}` && string(raw) != `{}` {
		m.Extra = raw
	}
	return m, nil
}

// abandoning reports whether an update of an instance or a binding
// removes Bindery's finalizer, which the object had (old) and the update
// has not (obj): the client abandons it. An object being deleted is
// abandoned through the catalog's one abandon operation once the update
// is stored (deleting is true: abandoned, see abandon); a live one is
// marked in m (catalog.AbandonAnnotation), so that its deletion will skip
// the broker.
func abandoning(old, obj runtime.Object, m *catalog.Meta) (deleting bool) {
	om := objectMetaOf(old)
	if !slices.Contains(om.Finalizers, Finalizer) || slices.Contains(objectMetaOf(obj).Finalizers, Finalizer) {
		return false
	}
	if om.DeletionTimestamp != nil {
		return true
	}
	annotations := maps.Clone(m.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[catalog.AbandonAnnotation] = "true"
	m.Annotations = annotations
	return false
}

// requester names the user of ctx for the history, as abandon records it.
func requester(ctx context.Context) string {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok || u.GetName() == "" {
		return ""
	}
	return fmt.Sprintf("Kubernetes user %q", u.GetName())
}

// setMeta copies what a client may change of metadata into a catalog Meta.
// The rest of the metadata (managedFields, ownerReferences, …) stays as
// stored when it is the same document: the catalog tells an unchanged
// object by its text, which PostgreSQL formats its own way, and a write
// that changes nothing makes no revision and no MODIFIED event, as in
// kube-apiserver (an apply repeated by a GitOps tool, a controller that
// updates at every turn).
func setMeta(dst *catalog.Meta, src catalog.Meta) {
	dst.Labels, dst.Annotations, dst.Finalizers = src.Labels, src.Annotations, src.Finalizers
	if !sameSpec(dst.Extra, src.Extra) {
		dst.Extra = src.Extra
	}
}

// fromRaw converts a catalog object of kind to its v1beta1 object.
func fromRaw(kind string, r *catalog.RawObject) (runtime.Object, error) {
	k, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("convert %s: unknown kind", kind)
	}
	obj := k.newObj()
	om, spec, status := k.parts(obj)
	finalizer := k.finalizer && showsFinalizer(kind, r)
	var err error
	if *om, err = objectMeta(&r.Meta, finalizer); err != nil {
		return nil, err
	}
	if k.decodeSpec != nil {
		if err := k.decodeSpec(r, spec); err != nil {
			return nil, err
		}
	} else if len(r.Spec) > 0 {
		if err := jsonv1.Unmarshal(r.Spec, spec); err != nil {
			return nil, fmt.Errorf("decode spec of %s %s: %w", kind, r.Name, err)
		}
	}
	if len(r.Status) > 0 {
		if err := jsonv1.Unmarshal(r.Status, status); err != nil {
			return nil, fmt.Errorf("decode status of %s %s: %w", kind, r.Name, err)
		}
	}
	return obj, nil
}

// decodeBrokerSpec decodes the catalog's spec of a broker into vs, the
// spec of either kind of broker.
func decodeBrokerSpec(r *catalog.RawObject, vs any) error {
	if len(r.Spec) == 0 {
		return nil
	}
	var cs catalog.BrokerSpec
	if err := json.Unmarshal(r.Spec, &cs); err != nil {
		return fmt.Errorf("decode spec of broker %s: %w", r.Name, err)
	}
	return brokerSpecTo(&cs, vs)
}

// showsFinalizer tells whether an instance or binding shows Bindery's
// finalizer: until the engine is done with it when it is being deleted
// (other finalizers may keep it after that), never once abandoned. Only an
// object being deleted can be released, so only its status is decoded
// here a second time.
func showsFinalizer(kind string, r *catalog.RawObject) bool {
	if catalog.Abandoned(&r.Meta) {
		return false
	}
	if r.DeletionTimestamp == nil || len(r.Status) == 0 {
		return true
	}
	if kind == catalog.KindBinding {
		b := &catalog.Binding{Meta: r.Meta}
		return json.Unmarshal(r.Status, &b.Status) != nil || !catalog.Released(b)
	}
	in := &catalog.Instance{Meta: r.Meta}
	return json.Unmarshal(r.Status, &in.Status) != nil || !catalog.Released(in)
}

// rawOf turns a typed catalog object's parts into a RawObject.
func rawOf(m catalog.Meta, spec, status any) (*catalog.RawObject, error) {
	s, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode spec of %s: %w", m.Name, err)
	}
	st, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encode status of %s: %w", m.Name, err)
	}
	return &catalog.RawObject{Meta: m, Spec: s, Status: st}, nil
}

// sameSpec reports whether two specs hold the same JSON. Parameters are
// raw JSON, which a client gives back reformatted (the catalog hands them
// out as PostgreSQL formats jsonb): a Go comparison would see a change.
func sameSpec(a, b any) bool {
	var x, y any
	if err := convertJSON(a, &x); err != nil {
		return false
	}
	if err := convertJSON(b, &y); err != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// convertJSON moves a value to another field-compatible type through JSON.
func convertJSON(from, to any) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, to)
}

// brokerSpecTo converts a broker spec to v1beta1, vs being a
// ClusterServiceBrokerSpec or a ServiceBrokerSpec (whose secretRef names no
// namespace: it is the broker's own). caBundle is the one field whose JSON
// differs (PEM text in the catalog, base64 bytes in Kubernetes).
func brokerSpecTo(cs *catalog.BrokerSpec, vs any) error {
	c := *cs
	c.CABundle = ""
	if err := convertJSON(&c, vs); err != nil {
		return fmt.Errorf("convert broker spec: %w", err)
	}
	if cs.CABundle != "" {
		*caBundleOf(vs) = []byte(cs.CABundle)
	}
	return nil
}

// brokerSpecFrom converts a v1beta1 broker spec, of a ClusterServiceBroker
// or of a ServiceBroker in namespace, to the catalog's. A ServiceBroker's
// Secret is in its own namespace, which the catalog's reference names.
func brokerSpecFrom(vs any, namespace string) (catalog.BrokerSpec, error) {
	var cs catalog.BrokerSpec
	if err := convertJSON(vs, &cs); err != nil {
		return cs, fmt.Errorf("convert broker spec: %w", err)
	}
	cs.CABundle = string(*caBundleOf(vs))
	if _, ok := vs.(*v1beta1.ServiceBrokerSpec); ok && cs.AuthInfo != nil {
		for _, ref := range []*catalog.ObjectRef{basicRef(cs.AuthInfo), bearerRef(cs.AuthInfo)} {
			if ref != nil {
				ref.Namespace = namespace
			}
		}
	}
	return cs, nil
}

func basicRef(a *catalog.BrokerAuthInfo) *catalog.ObjectRef {
	if a.Basic == nil {
		return nil
	}
	return a.Basic.SecretRef
}

func bearerRef(a *catalog.BrokerAuthInfo) *catalog.ObjectRef {
	if a.Bearer == nil {
		return nil
	}
	return a.Bearer.SecretRef
}

// caBundleOf is the caBundle field of either kind's broker spec.
func caBundleOf(vs any) *[]byte {
	switch s := vs.(type) {
	case *v1beta1.ClusterServiceBrokerSpec:
		return &s.CABundle
	case *v1beta1.ServiceBrokerSpec:
		return &s.CABundle
	}
	panic(fmt.Sprintf("caBundleOf %T: not a broker spec", vs)) // a programming error
}
