package servicebinding

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	sbv1 "github.com/bindery-dev/bindery/apis/servicebinding/v1"

	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/internal/pki"
)

// Manifests are what InstallLocal applies: the CRDs and the
// MutatingWebhookConfiguration of deploy/servicebinding.
type Manifests struct {
	CRDs                 [][]byte
	WebhookConfiguration []byte
}

// fieldManager owns, for server-side apply, what InstallLocal writes.
const fieldManager = "bindery"

// Certificate lifetimes of a local webhook: the CA lasts; the serving
// certificate is renewed at start when less than renewBefore is left.
const (
	localCAValidity = 10 * 365 * 24 * time.Hour
	renewBefore     = 30 * 24 * time.Hour
)

// InstallLocal prepares the webhook to run outside the cluster, as
// `bindery up --kubeconfig` runs it: a serving certificate for o's listen
// address from a CA kept in dir (made once, so a restart presents the
// same CA), which o then serves; the CRDs, applied and established; and the
// webhook configuration, pointing the API server at
// https://HOST:PORT/mutate with that CA. The cluster must reach the address
// (a cluster on this machine, for the default 127.0.0.1:9443). Each of
// its requests is bounded by o.KubeTimeout. It returns the webhook's URL.
func InstallLocal(ctx context.Context, log *slog.Logger, cfg *rest.Config, o *Options, dir string, m Manifests) (string, error) {
	host := o.host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	spec := pki.Spec{CommonName: "bindery-webhook", Usage: pki.Server}
	if ip := net.ParseIP(host); ip != nil {
		spec.IPAddresses = []net.IP{ip}
	} else {
		spec.DNSNames = []string{host}
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), "bindery-webhook-ca", localCAValidity)
	if err != nil {
		return "", fmt.Errorf("webhook CA: %w", err)
	}
	if _, err := ca.Ensure(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), spec, renewBefore); err != nil {
		return "", fmt.Errorf("webhook serving certificate: %w", err)
	}
	o.CertDir = dir
	webhookURL := (&url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(o.Port())), Path: MutatePath}).String()

	c, err := newClient(cfg, o.KubeTimeout)
	if err != nil {
		return "", err
	}
	for _, doc := range m.CRDs {
		u, err := decode(doc)
		if err != nil {
			return "", fmt.Errorf("CRD: %w", err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return "", fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
		}
		if err := waitEstablished(ctx, c, u.GetName()); err != nil {
			return "", err
		}
	}
	mwc, err := decode(m.WebhookConfiguration)
	if err != nil {
		return "", fmt.Errorf("webhook configuration: %w", err)
	}
	if err := pointAt(mwc, webhookURL, ca.CertPEM()); err != nil {
		return "", err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(mwc), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return "", fmt.Errorf("apply MutatingWebhookConfiguration %s: %w", mwc.GetName(), err)
	}
	log.Info("installed the servicebinding.io CRDs and webhook configuration", "webhook", mwc.GetName(), "url", webhookURL)
	return webhookURL, nil
}

func decode(doc []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		return nil, err
	}
	if u.GetKind() == "" || u.GetName() == "" {
		return nil, errors.New("a manifest without kind or name")
	}
	return u, nil
}

// pointAt makes every webhook of the configuration call url, trusting
// caPEM, in place of the in-cluster Service that cert-manager's CA
// injection serves.
func pointAt(mwc *unstructured.Unstructured, url string, caPEM []byte) error {
	ann := mwc.GetAnnotations()
	delete(ann, "cert-manager.io/inject-ca-from")
	mwc.SetAnnotations(ann)
	hooks, _, err := unstructured.NestedSlice(mwc.Object, "webhooks")
	if err != nil || len(hooks) == 0 {
		return fmt.Errorf("webhook configuration %s: no webhooks (%v)", mwc.GetName(), err)
	}
	for i := range hooks {
		h, ok := hooks[i].(map[string]any)
		if !ok {
			return fmt.Errorf("webhook configuration %s: webhooks[%d] is not an object", mwc.GetName(), i)
		}
		// Bytes are base64 in the API's JSON, which unstructured holds.
		h["clientConfig"] = map[string]any{"url": url, "caBundle": base64.StdEncoding.EncodeToString(caPEM)}
		hooks[i] = h
	}
	return unstructured.SetNestedField(mwc.Object, hooks, "webhooks")
}

// waitEstablished waits until the API server serves the CRD's resources.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, nil //nolint:nilerr // a failed read is retried until the timeout
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

// Uninstall removes what InstallLocal installed and what the controller
// left behind: the webhook configuration first, so that no admission
// calls a webhook that is gone; then each ServiceBinding's projection
// from its workloads and its finalizer; the CRDs, and with them the
// ServiceBindings and mappings; and NamespaceLabel from the namespaces.
// What is gone already is skipped, so it can be run again.
func Uninstall(ctx context.Context, log *slog.Logger, cfg *rest.Config, m Manifests) error {
	c, err := newClient(cfg, 0)
	if err != nil {
		return err
	}
	if err := removeWebhookConfiguration(ctx, c, m); err != nil {
		return err
	}
	log.Info("deleted the webhook configuration")
	if err := releaseBindings(ctx, log, c); err != nil {
		return err
	}
	for _, doc := range m.CRDs {
		crd, err := decode(doc)
		if err != nil {
			return fmt.Errorf("CRD: %w", err)
		}
		if err := deleteAndWait(ctx, c, crd); err != nil {
			return err
		}
		log.Info("deleted CRD", "name", crd.GetName())
	}
	var nss metav1.PartialObjectMetadataList
	nss.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := c.List(ctx, &nss, client.MatchingLabels{NamespaceLabel: "true"}); err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	r := &Reconciler{client: c}
	for _, ns := range nss.Items {
		if err := r.labelNamespace(ctx, ns.Name, false); err != nil {
			return err
		}
	}
	return nil
}

// RemoveWebhookConfiguration deletes the MutatingWebhookConfiguration
// InstallLocal applied, if it is there.
func RemoveWebhookConfiguration(ctx context.Context, cfg *rest.Config, m Manifests) error {
	c, err := newClient(cfg, 0)
	if err != nil {
		return err
	}
	return removeWebhookConfiguration(ctx, c, m)
}

// newClient is a client of the cluster for the types Scheme holds, without
// the manager's cache: for the installer's few reads and writes. It
// watches nothing, so each request is bounded (by timeout, else cfg's own
// timeout, else kubecall.DefaultTimeout): a request kube-apiserver never
// answered would hold `bindery up` before it serves, or `bindery down`,
// for good.
func newClient(cfg *rest.Config, timeout time.Duration) (client.Client, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = cmp.Or(timeout, cfg.Timeout, kubecall.DefaultTimeout)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("cluster client: %w", err)
	}
	return c, nil
}

func removeWebhookConfiguration(ctx context.Context, c client.Client, m Manifests) error {
	mwc, err := decode(m.WebhookConfiguration)
	if err != nil {
		return fmt.Errorf("webhook configuration: %w", err)
	}
	if err := c.Delete(ctx, mwc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete MutatingWebhookConfiguration %s: %w", mwc.GetName(), err)
	}
	return nil
}

// releaseBindings takes every ServiceBinding's projection out of its
// workloads and removes its finalizer, which no controller would remove
// once the CRD is being deleted.
func releaseBindings(ctx context.Context, log *slog.Logger, c client.Client) error {
	var list sbv1.ServiceBindingList
	if err := c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("list servicebindings: %w", err)
	}
	r := &Reconciler{client: c, apiReader: c, mapper: c.RESTMapper(), log: log}
	for i := range list.Items {
		sb := &list.Items[i]
		if err := r.unprojectAll(ctx, sb); err != nil {
			return fmt.Errorf("servicebinding %s/%s: %w", sb.Namespace, sb.Name, err)
		}
		orig := sb.DeepCopy()
		if controllerutil.RemoveFinalizer(sb, Finalizer) {
			if err := c.Patch(ctx, sb, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("servicebinding %s/%s: remove finalizer: %w", sb.Namespace, sb.Name, err)
			}
		}
		log.Info("released servicebinding", "servicebinding", sb.Namespace+"/"+sb.Name)
	}
	return nil
}

// deleteAndWait deletes o and waits, a minute at most, until it is gone.
func deleteAndWait(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("%s %s still there: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}
