package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/bindery-dev/bindery/broker"
	"github.com/bindery-dev/bindery/migrations"
)

// runKeys is `bindery keys reseal`: after a rotation (the new key first in
// --encryption-key, the older ones after it), every secret the catalog and
// the broker keep is sealed again with the new key, and so are their
// canaries; the older keys can then be dropped.
func runKeys(ctx context.Context, e env, args []string) error {
	if helpAsked(args) || len(args) == 0 || args[0] != "reseal" {
		fmt.Fprintln(e.stderr, "usage: bindery keys reseal [flags]\n\nSeals every secret of the catalog and the broker again with the first key of --encryption-key\n(BINDERY_ENCRYPTION_KEY) once every process runs with it first; the older keys can then be dropped.\n`bindery keys reseal -h` lists the flags.")
		if helpAsked(args) {
			return flag.ErrHelp
		}
		return usagef("keys: want `keys reseal`")
	}
	var s server
	log, pool, keys, err := s.start(ctx, e, "keys reseal", args[1:], "the catalog's and the broker's secrets",
		func(*flag.FlagSet) {}, func(*dbOptions) error { return nil }, migrations.Catalog, migrations.Broker)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := openStore(ctx, pool, keys, log)
	if err != nil {
		return err
	}
	first := keys.Fingerprints()[0]
	n, err := store.Reseal(ctx)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	fmt.Fprintf(e.stdout, "catalog: %d secrets sealed again with key %s\n", n, first)
	if n, err = broker.Reseal(ctx, pool, keys); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	fmt.Fprintf(e.stdout, "broker: %d secrets sealed again with key %s\n", n, first)
	fmt.Fprintf(e.stdout, "every secret is sealed with key %s: the other keys can be dropped\n", first)
	return nil
}
