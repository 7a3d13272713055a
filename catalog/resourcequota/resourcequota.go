// Package resourcequota keeps the catalog's copy of the cluster's
// ResourceQuotas that limit Service Catalog's objects: their hard limits on
// count/serviceinstances.servicecatalog.k8s.io,
// count/servicebindings.servicecatalog.k8s.io and
// count/servicebrokers.servicecatalog.k8s.io (catalog.ResourceQuota). The
// catalog checks them with its own quotas, in the transaction that creates
// an instance, binding or namespace's broker, so they hold for creations through every door
// (REST, CLI, web UI and the Kubernetes API), not only for those that
// pass an admission chain.
//
// The engine runs it whenever it has a cluster. It reads spec.hard, what
// the namespace's admin declared, without waiting for the cluster's quota
// controller to copy it into status; as Kubernetes does for object
// counts, a ResourceQuota with scopes or a scope selector limits none of
// these objects.
package resourcequota

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/bindery-dev/bindery/catalog"
)

// The ResourceQuota resources that limit the catalog's objects.
const (
	Instances corev1.ResourceName = "count/serviceinstances.servicecatalog.k8s.io"
	Bindings  corev1.ResourceName = "count/servicebindings.servicecatalog.k8s.io"
	Brokers   corev1.ResourceName = "count/servicebrokers.servicecatalog.k8s.io"
)

// Store is where the limits go: catalog.Store.
type Store interface {
	PutResourceQuota(ctx context.Context, rq catalog.ResourceQuota) error
	DeleteResourceQuota(ctx context.Context, namespace, name string) error
	ReplaceResourceQuotas(ctx context.Context, all []catalog.ResourceQuota) error
}

// Limits is what a ResourceQuota sets on the catalog's objects; neither
// limit, when it sets none of them or has scopes.
func Limits(rq *corev1.ResourceQuota) catalog.ResourceQuota {
	out := catalog.ResourceQuota{Namespace: rq.Namespace, Name: rq.Name}
	if len(rq.Spec.Scopes) > 0 || (rq.Spec.ScopeSelector != nil && len(rq.Spec.ScopeSelector.MatchExpressions) > 0) {
		return out
	}
	if q, ok := rq.Spec.Hard[Instances]; ok {
		v := q.Value()
		out.Instances = &v
	}
	if q, ok := rq.Spec.Hard[Bindings]; ok {
		v := q.Value()
		out.Bindings = &v
	}
	if q, ok := rq.Spec.Hard[Brokers]; ok {
		v := q.Value()
		out.Brokers = &v
	}
	return out
}

// resync is how often every ResourceQuota is written again, in case a
// write was lost.
const resync = 10 * time.Minute

// Run copies the cluster's ResourceQuotas into store until ctx ends: all
// of them once the informer has listed them (forgetting those gone while
// nothing copied them), then each change, retried with backoff when the
// database refuses.
func Run(ctx context.Context, kube kubernetes.Interface, store Store, log *slog.Logger) error {
	factory := informers.NewSharedInformerFactory(kube, resync)
	inf := factory.Core().V1().ResourceQuotas()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "resourcequotas"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return fmt.Errorf("watch ResourceQuotas: %w", err)
	}
	lister := inf.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	if err := replaceAll(ctx, lister, store); err != nil {
		// Each ResourceQuota is queued as well: they come in one by one.
		log.WarnContext(ctx, "copy the cluster's ResourceQuotas", "error", err)
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		if err := copyOne(ctx, lister, store, key); err != nil {
			log.WarnContext(ctx, "copy a ResourceQuota", "resourcequota", key, "error", err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// replaceAll makes the catalog's copy that of every ResourceQuota listed.
func replaceAll(ctx context.Context, lister corelisters.ResourceQuotaLister, store Store) error {
	all, err := lister.List(labels.Everything())
	if err != nil {
		return err
	}
	out := make([]catalog.ResourceQuota, 0, len(all))
	for _, rq := range all {
		out = append(out, Limits(rq))
	}
	return store.ReplaceResourceQuotas(ctx, out)
}

// copyOne copies the ResourceQuota of key (namespace/name), or forgets it.
func copyOne(ctx context.Context, lister corelisters.ResourceQuotaLister, store Store, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key of ours: nothing to retry
	}
	rq, err := lister.ResourceQuotas(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return store.DeleteResourceQuota(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	return store.PutResourceQuota(ctx, Limits(rq))
}
