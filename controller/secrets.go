package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/bindingdata"
)

// Labels and owner of the Secrets the engine writes.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	ManagedBy       = "bindery"
	LabelBindingID  = "servicecatalog.k8s.io/binding-uid"
	LabelBinding    = "servicecatalog.k8s.io/binding"
	LabelInstance   = "servicecatalog.k8s.io/instance"
	bindingAPI      = "servicecatalog.k8s.io/v1beta1"
	bindingKind     = "ServiceBinding"
	secretTypeFmt   = "servicebinding.io/%s"
	annotationClass = "servicecatalog.k8s.io/class"
)

// errKube marks errors from reading the cluster, which are retried.
var errKube = errors.New("cluster")

// parametersFrom reads parameters from Secret keys (each key holds a JSON
// object).
func (c *Controller) parametersFrom(ctx context.Context, namespace string, from []catalog.ParametersFrom) (map[string]any, error) {
	if c.kube == nil {
		return nil, errors.New("spec.parametersFrom needs a Kubernetes cluster, and none is configured")
	}
	out := map[string]any{}
	for i, f := range from {
		ref := f.SecretKeyRef
		if ref == nil {
			return nil, fmt.Errorf("spec.parametersFrom[%d]: secretKeyRef is required", i)
		}
		s, err := c.secretsIn(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%w: spec.parametersFrom[%d]: read Secret %s/%s: %v", errKube, i, namespace, ref.Name, err)
		}
		raw, ok := s.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("spec.parametersFrom[%d]: Secret %s/%s has no key %q", i, namespace, ref.Name, ref.Key)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("spec.parametersFrom[%d]: key %q of Secret %s/%s is not a JSON object", i, ref.Key, namespace, ref.Name)
		}
		for k, v := range m {
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("spec.parametersFrom[%d]: parameter %q is given twice", i, k)
			}
			out[k] = v
		}
	}
	return out, nil
}

// SecretData turns credentials into Secret data: strings as they are,
// other values as JSON, then the binding's transforms in order.
// addKeysFrom reads other Secrets through from (namespace of the binding).
func SecretData(creds map[string]any, transforms []catalog.SecretTransform, from func(name string) (map[string][]byte, error)) (map[string][]byte, error) {
	return bindingdata.Data(creds, transforms, from)
}

// BuildSecret is the Secret a binding's credentials become: named
// spec.secretName, typed servicebinding.io/<type> with the `type` and
// `provider` keys servicebinding.io workloads read, owned by the binding
// and labelled to find it again.
func BuildSecret(b *catalog.Binding, class *catalog.ServiceClass, brokerName string, data map[string][]byte) *corev1.Secret {
	data = bindingdata.WithTypeProvider(data, class, brokerName)
	typ := string(data["type"])
	ctrl := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      b.Spec.SecretName,
			Namespace: b.Namespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedBy,
				LabelBindingID: b.ID,
				LabelBinding:   b.Name,
				LabelInstance:  b.Spec.InstanceRef.Name,
			},
			Annotations: map[string]string{annotationClass: class.Spec.ExternalName},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: bindingAPI, Kind: bindingKind, Name: b.Name, UID: types.UID(b.ID),
				Controller: &ctrl, BlockOwnerDeletion: &ctrl,
			}},
		},
		Type: corev1.SecretType(fmt.Sprintf(secretTypeFmt, typ)),
		Data: data,
	}
}

// ownedBy reports whether a Secret belongs to the binding.
func ownedBy(s *corev1.Secret, b *catalog.Binding) bool {
	for _, o := range s.OwnerReferences {
		if o.UID == types.UID(b.ID) && o.Kind == bindingKind {
			return true
		}
	}
	return false
}

// errNamespaceTerminating says the binding's namespace is being deleted,
// so its Secret cannot be written: the binding goes with the namespace,
// and its deletion wakes it up. Nothing to retry or to mark Ready.
var errNamespaceTerminating = errors.New("the namespace is terminating")

// ensureSecret writes (or repairs) the binding's Secret, or removes it when
// the binding asks for none (catalog.NoSecretAnnotation). creds nil means
// read them from the catalog. Without a cluster there is nothing to do.
func (c *Controller) ensureSecret(ctx context.Context, env *bindingEnv, creds map[string]any) error {
	b := env.b
	if c.kube == nil || catalog.NoSecret(&b.Meta) {
		return c.deleteSecret(ctx, b) // nothing without a cluster; else one written before the annotation goes
	}
	if creds == nil {
		var err error
		if creds, err = c.store.Credentials(ctx, b.ID); err != nil {
			return fmt.Errorf("read credentials of %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	secrets := c.secretsIn(b.Namespace)
	data, err := SecretData(creds, b.Spec.SecretTransforms, func(name string) (map[string][]byte, error) {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return s.Data, nil
	})
	if err != nil {
		return &secretProblem{reason: reasonSecretFailed, msg: "Error injecting bind result: " + err.Error()}
	}
	want := BuildSecret(b, env.class, env.broker.Name, data)
	// The informer's cache first: a Secret as it should be needs no
	// request, and one it has not seen is most likely new, so created
	// without looking (what the cache missed answers AlreadyExists).
	cached, err := c.secrets.Secrets(b.Namespace).Get(want.Name)
	switch {
	case err == nil && ownedBy(cached, b) && sameSecret(cached, want):
		return nil
	case apierrors.IsNotFound(err):
		_, err := secrets.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return errNamespaceTerminating
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Secret %s/%s: %w", b.Namespace, want.Name, err)
		}
	}
	have, err := secrets.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err := secrets.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return errNamespaceTerminating
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Secret %s/%s: %w", b.Namespace, want.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read Secret %s/%s: %w", b.Namespace, want.Name, err)
	case !ownedBy(have, b):
		return &secretProblem{reason: reasonSecretNotOwned, msg: fmt.Sprintf("Secret %s/%s exists and does not belong to this binding; it is left alone. Delete it or choose another spec.secretName.", b.Namespace, want.Name)}
	}
	if sameSecret(have, want) {
		return nil
	}
	if have.Type != want.Type {
		// The type of a Secret cannot change: replace it.
		if err := secrets.Delete(ctx, have.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replace Secret %s/%s: %w", b.Namespace, have.Name, err)
		}
		_, err := secrets.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	have = have.DeepCopy()
	have.Data, have.Labels, have.OwnerReferences = want.Data, want.Labels, want.OwnerReferences
	if _, err := secrets.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("repair Secret %s/%s: %w", b.Namespace, have.Name, err)
	}
	c.logger(ctx).Info("Secret repaired")
	return nil
}

// secretChanged reports whether an informer's update is a change: a
// relist after the watch broke hands every Secret back as an update, and
// with 100,000 bindings that would be as many reconciles for nothing.
func secretChanged(old, obj any) bool {
	o, ok1 := old.(*corev1.Secret)
	n, ok2 := obj.(*corev1.Secret)
	return !ok1 || !ok2 || o.ResourceVersion != n.ResourceVersion
}

// sameSecret reports whether a Secret has what the binding's should have.
func sameSecret(have, want *corev1.Secret) bool {
	return have.Type == want.Type && maps.EqualFunc(have.Data, want.Data, bytes.Equal) && sameLabels(have.Labels, want.Labels)
}

func sameLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// secretProblem is a reason the binding's Secret cannot be written that
// the binding's status tells (secretProblem.record); it is retried with
// backoff.
type secretProblem struct{ reason, msg string }

func (p *secretProblem) Error() string { return p.msg }

// record puts the problem in a binding's status.
func (p *secretProblem) record(st *catalog.BindingStatus, now time.Time) {
	catalog.SetCondition(&st.Conditions, catalog.Condition{Type: catalog.ConditionReady, Status: catalog.ConditionFalse, Reason: p.reason, Message: p.msg}, now)
	st.LastError = p.msg
}

func (p *secretProblem) event() catalog.EventRecord {
	return catalog.EventRecord{Type: "Warning", Reason: p.reason, Message: p.msg}
}

// secretFailed records a Secret problem of a bound binding, and returns
// it to be retried.
func (c *Controller) secretFailed(ctx context.Context, b *catalog.Binding, p *secretProblem) error {
	now := c.now().UTC()
	if _, err := c.writeBinding(ctx, b, func(b *catalog.Binding) error {
		p.record(&b.Status, now)
		return nil
	}, nil, p.event()); err != nil {
		return err
	}
	return p
}

// deleteSecret removes the binding's Secret, if it is the binding's.
func (c *Controller) deleteSecret(ctx context.Context, b *catalog.Binding) error {
	if c.kube == nil {
		return nil
	}
	secrets := c.secretsIn(b.Namespace)
	s, err := secrets.Get(ctx, b.Spec.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Secret %s/%s: %w", b.Namespace, b.Spec.SecretName, err)
	}
	if !ownedBy(s, b) {
		return nil
	}
	err = secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s/%s: %w", b.Namespace, s.Name, err)
	}
	return nil
}

// watchSecrets repairs Bindery's Secrets: a change to one, or its
// deletion, puts its binding back in the queue. Its cache is c.secrets;
// the returned function starts it and waits until it is filled.
func (c *Controller) watchSecrets(ctx context.Context) (func() error, error) {
	// No resync: it would hand every Secret back as an update every
	// period, and a reconcile of each binding with it (the cache holds
	// what the kube-apiserver said; a resync learns nothing new).
	factory := informers.NewSharedInformerFactoryWithOptions(c.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelManagedBy + "=" + ManagedBy }))
	informer := factory.Core().V1().Secrets().Informer()
	c.secrets = factory.Core().V1().Secrets().Lister()
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if s, ok := obj.(*corev1.Secret); ok && s.Labels[LabelBindingID] != "" {
			c.queue.Add(bindingKey(s.Namespace, s.Labels[LabelBindingID]))
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			if secretChanged(old, obj) {
				enqueue(obj)
			}
		},
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	return func() error {
		factory.Start(ctx.Done())
		for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("sync the informer of %v", typ)
			}
		}
		return nil
	}, nil
}
