package main

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/migrations"
)

// runServeAPIServer is `bindery serve apiserver`: servicecatalog.k8s.io
// over the catalog's tables, behind the cluster's aggregation layer when
// one is configured, else standalone with the admin kubeconfig it writes
// printed on stdout.
func runServeAPIServer(ctx context.Context, e env, args []string) error {
	var s server
	var f apiserver.Flags
	log, pool, _, err := s.start(ctx, e, "serve apiserver", args, "", f.AddFlags,
		func(*dbOptions) error { return errors.Join(f.Complete(), f.Validate()) }, migrations.Catalog)
	if err != nil {
		return err
	}
	defer pool.Close()
	// k8s.io/apiserver logs through klog: send it to the same handler.
	klog.SetSlogLogger(log.With("component", "apiserver"))
	// No encryption keys: the API server reads and writes no secret.
	store := newStore(pool, nil, log)
	opts := &f.Options
	return apiserver.Run(ctx, opts, store, log.With("component", "apiserver"), func(c *apiserver.Config) {
		if opts.Delegated() {
			fmt.Fprintf(e.stdout, "Kubernetes API: %s (behind the cluster's aggregation layer)\n", c.Server)
			return
		}
		fmt.Fprintf(e.stdout, "Kubernetes API: %s\nkubeconfig: %s\n", c.Server, opts.Kubeconfig)
	})
}
