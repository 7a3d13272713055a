package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/migrations"
)

// runServeAPIServer is `bindery serve apiserver`: servicecatalog.k8s.io
// over the catalog's tables, behind the cluster's aggregation layer when
// one is configured, else standalone with the admin kubeconfig it writes
// printed on stdout.
func runServeAPIServer(ctx context.Context, e env, args []string) error {
	var s server
	var f apiserver.Flags
	// The keys are optional here: only the credentials subresource opens
	// credentials, and without keys it answers 503 saying so.
	var ko keyOptions
	var limits storeLimits
	var storeOpts []catalog.Option
	var fs *flag.FlagSet
	var keys *keyring.Keyring
	log, pool, _, err := s.start(ctx, e, "serve apiserver", args, "",
		func(set *flag.FlagSet) {
			fs = set
			f.AddFlags(set)
			ko.addFlags(set, "binding credentials")
			limits.addFlags(set)
		},
		func(*dbOptions) error {
			var err error
			storeOpts, err = limits.storeOptions()
			errs := []error{f.Complete(), f.Validate(), err}
			if ko.complete(fs); ko.encryptionKey != "" {
				var err error
				keys, err = ko.keyring()
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		}, migrations.Catalog)
	if err != nil {
		return err
	}
	defer pool.Close()
	// k8s.io/apiserver logs through klog: send it to the same handler.
	klog.SetSlogLogger(log.With("component", "apiserver"))
	store := newStore(pool, keys, log, storeOpts...)
	opts := &f.Options
	return apiserver.Run(ctx, opts, store, log.With("component", "apiserver"), func(c *apiserver.Config) {
		if opts.Delegated() {
			fmt.Fprintf(e.stdout, "Kubernetes API: %s (behind the cluster's aggregation layer)\n", c.Server)
			return
		}
		fmt.Fprintf(e.stdout, "Kubernetes API: %s\nkubeconfig: %s\n", c.Server, opts.Kubeconfig)
	})
}
