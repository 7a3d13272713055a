package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"

	"github.com/bindery-dev/bindery/migrations"
)

// runMigrate is `bindery migrate up|down|version [--schema S]`.
func runMigrate(ctx context.Context, e env, args []string) error {
	if helpAsked(args) {
		fmt.Fprintln(e.stderr, "usage: bindery migrate up|down|version [flags]\n\nApplies, reverts (one step of one schema) or reports the database migrations; `bindery migrate up -h` lists the flags.")
		return flag.ErrHelp
	}
	if len(args) == 0 || !slices.Contains([]string{"up", "down", "version"}, args[0]) {
		return usagef("migrate: want up, down or version")
	}
	action := args[0]
	fs := newFlagSet(e, "migrate "+action)
	var db dbOptions
	db.addFlags(fs)
	schema := fs.String("schema", "", fmt.Sprintf("schema to act on %v (default: all for up and version; required for down)", migrations.Schemas()))
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	errs := db.validate()
	schemas := migrations.Schemas()
	if *schema != "" {
		if !slices.Contains(schemas, *schema) {
			errs = append(errs, usagef("--schema: unknown schema %q (have %v)", *schema, schemas))
		}
		schemas = []string{*schema}
	} else if action == "down" {
		errs = append(errs, usagef("migrate down: --schema is required (one of %v)", schemas))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log, err := e.logger(*level)
	if err != nil {
		return err
	}
	db.noMigrate = true
	pool, err := db.open(ctx, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, s := range schemas {
		switch action {
		case "up":
			if err := migrations.Up(ctx, pool, s); err != nil {
				return err
			}
		case "down":
			if err := migrations.Down(ctx, pool, s); err != nil {
				return err
			}
		}
		v, dirty, err := migrations.Version(ctx, pool, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\t%d", s, v)
		if dirty {
			fmt.Fprint(e.stdout, "\tdirty")
		}
		fmt.Fprintln(e.stdout)
	}
	return nil
}
