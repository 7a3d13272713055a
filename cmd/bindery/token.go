package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/migrations"
)

// runToken is `bindery token create --role ROLE [--name N] [--namespace
// NS]... [--expires-in D]`: it prints a new API token, alone, on stdout.
// It works on the database, since the first admin token cannot come from
// the REST API; `bindery token list|revoke` go through the REST API.
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
	name := fs.String("name", "", "a name for the token, unique, to list and revoke it by")
	var namespaces stringList
	fs.Var(&namespaces, "namespace", "limit the token to this namespace (repeatable; none: every namespace and the cluster-scoped objects)")
	expiresIn := fs.Duration("expires-in", 0, "the token stops working after this long, e.g. 720h (0: never)")
	level := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	errs := db.validate()
	if *role == "" {
		errs = append(errs, errors.New("--role is required: viewer, developer or admin"))
	}
	if *expiresIn < 0 {
		errs = append(errs, fmt.Errorf("--expires-in %s: want a positive duration such as 720h, or 0 for no expiry", *expiresIn))
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
	req := catalog.TokenRequest{Role: *role, Name: *name, Namespaces: namespaces}
	if *expiresIn > 0 {
		at := time.Now().Add(*expiresIn).UTC()
		req.ExpiresAt = &at
	}
	token, _, err := catalog.NewStore(pool, nil, log).IssueToken(ctx, req)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, token)
	return nil
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set adds one value.
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
