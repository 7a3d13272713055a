package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/migrations"
)

// runToken is `bindery token create --role ROLE`: it prints a new API
// token, alone, on stdout.
func runToken(ctx context.Context, e env, args []string) error {
	if helpAsked(args) {
		fmt.Fprintln(e.stderr, "usage: bindery token create --role viewer|developer|admin [flags]\n\nCreates a REST API token and prints it alone; `bindery token create -h` lists the flags.")
		return flag.ErrHelp
	}
	if len(args) == 0 || args[0] != "create" {
		return errors.New("token: want `token create --role viewer|developer|admin`")
	}
	fs := newFlagSet(e, "token create")
	var db dbOptions
	db.addFlags(fs)
	role := fs.String("role", "", "the token's role: viewer, developer or admin")
	level := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	errs := db.validate()
	if *role == "" {
		errs = append(errs, errors.New("--role is required: viewer, developer or admin"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log, err := e.logger(*level)
	if err != nil {
		return err
	}
	pool, err := db.open(ctx, log, migrations.Catalog)
	if err != nil {
		return err
	}
	defer pool.Close()
	// Tokens need no encryption key: only their hash is stored.
	token, err := catalog.NewStore(pool, nil, log).CreateToken(ctx, *role)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, token)
	return nil
}
