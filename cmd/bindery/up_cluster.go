package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/controller"
	"github.com/bindery-dev/bindery/internal/kubecall"
	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// validateAndListen checks the flags that need no database and opens
// every listener, the webhook's included when up runs it (a cluster is
// configured and --webhook-listen is not empty): all before anything is
// written, to the data directory or to the cluster, so that a port that
// is taken is reported, with its flag, while the cluster is untouched.
func (o *upOptions) validateAndListen() ([]catalog.Option, []net.Listener, error) {
	storeOpts, err := o.brokers.storeOptions()
	limits, limitsErr := o.limits.storeOptions()
	storeOpts = append(storeOpts, limits...)
	if err := errors.Join(err, limitsErr, o.catalog.Validate(), o.controller.Validate(), o.validateWebhook()); err != nil {
		return nil, nil, err
	}
	kube, err := o.controller.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	ls, err := o.listen(kube != nil && o.webhook.Listen != "")
	return storeOpts, ls, err
}

// uninstallWebhookConfiguration removes the MutatingWebhookConfiguration
// when up stops: its egress webhook fails closed (failurePolicy Fail, in
// every namespace), so left in place it would refuse the Pods that carry
// the egress annotation until up runs again. The CRDs and what is in them
// stay. After a kill, `bindery down` removes it.
func (u *up) uninstallWebhookConfiguration() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := webhookManifests()
	if err == nil {
		err = servicebinding.RemoveWebhookConfiguration(ctx, u.kube, m)
	}
	if err != nil {
		u.log.Warn("remove the webhook configuration; `bindery down` removes it", "error", err)
		return
	}
	u.log.Info("removed the webhook configuration")
}

// downOptions are the flags of `bindery down`.
type downOptions struct {
	controller controller.Options
	level      string
}

// runDown is `bindery down`: it removes from the cluster everything `bindery
// up --kubeconfig` installed there, whether up stopped cleanly or was
// killed: the webhook configuration, the servicebinding.io CRDs (after
// taking every ServiceBinding's projection out of its workloads), the
// namespaces' label, and the Secrets the engine wrote for bindings.
func runDown(ctx context.Context, e env, args []string) error {
	var o downOptions
	fs := newFlagSet(e, "down")
	fs.StringVar(&o.controller.Kubeconfig, "kubeconfig", "", "kubeconfig `file` of the cluster `bindery up --kubeconfig` ran against (KUBECONFIG works too)")
	fs.DurationVar(&o.controller.KubeTimeout, kubecall.Flag, kubecall.DefaultTimeout, "timeout of each request to kube-apiserver: down makes single requests only")
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := kubecall.Validate(o.controller.KubeTimeout); err != nil {
		return err
	}
	log, err := e.logger(o.level)
	if err != nil {
		return err
	}
	return down(ctx, log, &o)
}

func down(ctx context.Context, log *slog.Logger, o *downOptions) error {
	if o.controller.Kubeconfig == "" {
		return errors.New("--kubeconfig (or KUBECONFIG) is required: the cluster `bindery up` ran against")
	}
	cfg, err := o.controller.RESTConfig()
	if err != nil {
		return err
	}
	// down makes single requests only: each is bounded, so that one
	// kube-apiserver never answers ends down with an error.
	cfg.Timeout = cmp.Or(o.controller.KubeTimeout, kubecall.DefaultTimeout)
	m, err := webhookManifests()
	if err != nil {
		return err
	}
	if err := servicebinding.Uninstall(ctx, log, cfg, m); err != nil {
		return fmt.Errorf("remove servicebinding.io: %w", err)
	}
	cfg.QPS, cfg.Burst = 200, 400 // as the engine's client: many Secrets
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cluster client: %w", err)
	}
	// The engine's Secrets: their owners are ServiceBindings of up's own
	// API server, which the cluster's garbage collector cannot see.
	sel := metav1.ListOptions{LabelSelector: controller.LabelManagedBy + "=" + controller.ManagedBy}
	secrets, err := kube.CoreV1().Secrets("").List(ctx, sel)
	if err != nil {
		return fmt.Errorf("list the Secrets of bindings: %w", err)
	}
	for _, s := range secrets.Items {
		if err := kube.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	log.Info("deleted the Secrets of bindings", "count", len(secrets.Items))
	return nil
}
