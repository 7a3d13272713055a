// Package token is `bindery token create|list|revoke`. The commands work
// on a Bindery's database — the first admin token has to come from
// somewhere — found by themselves: DATABASE_URL, else the data directory
// `bindery up` keeps (--data-dir). Away from any data directory, a logged-in
// admin manages tokens over the REST API instead.
package token

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// Record is what is known of a token, never the token itself: the REST
// API's token object.
type Record struct {
	ID         string     `json:"id"`
	Name       string     `json:"name,omitempty"`
	Role       string     `json:"role"`
	Namespaces []string   `json:"namespaces,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// Request describes a token to create: the body of POST /tokens.
type Request struct {
	Name       string     `json:"name,omitempty"`
	Role       string     `json:"role"`
	Namespaces []string   `json:"namespaces,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
}

// Store is a database's tokens.
type Store interface {
	// Create issues a token and returns it; only its hash is kept.
	Create(ctx context.Context, req Request) (string, error)
	// List returns every token's record.
	List(ctx context.Context) ([]Record, error)
	// Revoke removes a token named by id or name (ErrNotFound if none).
	Revoke(ctx context.Context, idOrName string) error
	// Close lets go of the database (and stops the server the store
	// started for the moment).
	Close() error
}

// Errors a Store returns, so that the exit code says what happened.
var (
	// ErrNotFound: no token has that id or name (exit code 3).
	ErrNotFound = errors.New("no such token")
	// ErrInvalid: the request cannot be a token (exit code 2).
	ErrInvalid = errors.New("invalid token request")
)

// Database names the database the commands work on: URL when set, else
// the data directory of `bindery up`.
type Database struct {
	URL       string
	DataDir   string
	NoMigrate bool
}

// Databases is what the binary, which owns databases, gives the commands.
type Databases struct {
	// DefaultDataDir is `bindery up`'s --data-dir default.
	DefaultDataDir string
	// Open opens the tokens of a database.
	Open func(ctx context.Context, db Database) (Store, error)
}

// Options are the inputs every token command shares: where the tokens are.
type Options struct {
	F         *cmdutil.Factory
	DBs       *Databases
	DataDir   string
	URL       string
	NoMigrate bool
	// dataDirFlag tells whether --data-dir was on the command line.
	dataDirFlag *pflag.Flag
}

// NewCmd builds `token` with create, list and revoke. dbs may be nil (a
// client without the server side): the commands then use the REST API.
func NewCmd(f *cmdutil.Factory, dbs *Databases) *cobra.Command {
	o := &Options{F: f, DBs: dbs}
	cmd := &cobra.Command{
		Use: "token", Aliases: []string{"tokens"}, Short: "Create, list and revoke API tokens",
		Long: "Create, list and revoke API tokens, on a Bindery's database: DATABASE_URL (or --database-url) when set,\n" +
			"else the data directory of `bindery up` (--data-dir, BINDERY_DATA_DIR; default .bindery), whose PostgreSQL is\n" +
			"used while `bindery up` runs, or started for the command and stopped afterwards.\n" +
			"Without either, and logged in (`bindery login`, BINDERY_URL), they go over the REST API with an admin token.",
	}
	pf := cmd.PersistentFlags()
	def := ".bindery"
	if dbs != nil && dbs.DefaultDataDir != "" {
		def = dbs.DefaultDataDir
	}
	pf.StringVar(&o.DataDir, "data-dir", def, "the data directory of bindery up whose database holds the tokens (also BINDERY_DATA_DIR)")
	pf.StringVar(&o.URL, "database-url", "", "PostgreSQL connection string (also DATABASE_URL); wins over --data-dir")
	pf.BoolVar(&o.NoMigrate, "no-migrate", false, "do not apply pending migrations first")
	o.dataDirFlag = pf.Lookup("data-dir")
	cmd.AddCommand(newCreate(o, nil), newList(o, nil), newRevoke(o, nil))
	return cmd
}

// where decides what the commands work on: the database (a Database) or,
// when nil, the REST API.
func (o *Options) where() (*Database, error) {
	getenv := o.F.Getenv
	db := &Database{URL: o.URL, DataDir: o.DataDir, NoMigrate: o.NoMigrate}
	for _, v := range []string{"BINDERY_DATABASE_URL", "DATABASE_URL"} {
		if db.URL == "" {
			db.URL = getenv(v)
		}
	}
	dirGiven := o.dataDirFlag != nil && o.dataDirFlag.Changed
	if !dirGiven {
		if v := getenv("BINDERY_DATA_DIR"); v != "" {
			db.DataDir, dirGiven = v, true
		}
	}
	_, statErr := os.Stat(db.DataDir)
	switch {
	case o.DBs == nil:
		return nil, nil
	case db.URL != "" || dirGiven:
		return db, nil
	}
	c, err := o.F.Client()
	if statErr == nil {
		if err == nil {
			// Found, not asked for: say so, for the login points elsewhere.
			fmt.Fprintf(o.F.IO.ErrOut, "bindery: tokens of the database of %s, not the server logged in to (%s); --data-dir or DATABASE_URL name another\n",
				db.DataDir, c.BaseURL)
		}
		return db, nil
	}
	if err == nil {
		return nil, nil
	}
	return nil, cmdutil.Usagef("no Bindery to work on: no data directory %s here (run `bindery up`, or give --data-dir), "+
		"no DATABASE_URL, and no login (`bindery login URL`)", db.DataDir)
}

// withStore runs do on the database's tokens, or returns false when the
// command is to go over the REST API.
func (o *Options) withStore(ctx context.Context, do func(Store) error) (bool, error) {
	db, err := o.where()
	if err != nil || db == nil {
		return false, err
	}
	s, err := o.DBs.Open(ctx, *db)
	if err != nil {
		return true, err
	}
	err = do(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, ErrInvalid) {
		err = &cmdutil.UsageError{Err: err}
	}
	return true, err
}

// CreateOptions are `token create`'s inputs.
type CreateOptions struct {
	*Options
	Req       Request
	ExpiresIn time.Duration
}

func newCreate(o *Options, run func(context.Context, *CreateOptions) error) *cobra.Command {
	c := &CreateOptions{Options: o}
	if run == nil {
		run = Create
	}
	cmd := &cobra.Command{
		Use: "create --role viewer|developer|admin", Short: "Create an API token and print it, alone (it is shown this once)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), c) },
	}
	fl := cmd.Flags()
	cmdutil.EnumFlag(cmd, &c.Req.Role, "role", "", []string{"viewer", "developer", "admin"}, "the token's role (required)")
	fl.StringVar(&c.Req.Name, "name", "", "a name for the token, unique, to list and revoke it by")
	fl.StringArrayVarP(&c.Req.Namespaces, "namespace", "n", nil, "limit the token to this namespace (repeatable; none: every namespace and the cluster-scoped objects)")
	fl.DurationVar(&c.ExpiresIn, "expires-in", 0, "the token stops working after this long, e.g. 720h (0: never)")
	return cmd
}

// Create issues a token and prints it alone on stdout.
func Create(ctx context.Context, o *CreateOptions) error {
	var errs []error
	if o.Req.Role == "" {
		errs = append(errs, errors.New("--role is required: viewer, developer or admin"))
	}
	if o.ExpiresIn < 0 {
		errs = append(errs, fmt.Errorf("--expires-in %s: want a positive duration such as 720h, or 0 for no expiry", o.ExpiresIn))
	}
	if err := errors.Join(errs...); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	req := o.Req
	if o.ExpiresIn > 0 {
		at := time.Now().Add(o.ExpiresIn).UTC()
		req.ExpiresAt = &at
	}
	var tok string
	done, err := o.withStore(ctx, func(s Store) (err error) {
		tok, err = s.Create(ctx, req)
		return err
	})
	if !done && err == nil {
		var created struct {
			Token string `json:"token"`
		}
		if err = o.rest(ctx, http.MethodPost, "/tokens", req, &created); err == nil {
			tok = created.Token
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(o.F.IO.Out, tok)
	return nil
}

// rest makes a request of the REST API with the saved login.
func (o *Options) rest(ctx context.Context, method, path string, body, out any) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	return c.Do(ctx, method, path, nil, body, out)
}

func newList(o *Options, run func(context.Context, *Options) error) *cobra.Command {
	if run == nil {
		run = List
	}
	return &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List API tokens (never the tokens themselves)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
}

// List prints the tokens' records.
func List(ctx context.Context, o *Options) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	var page struct {
		Items []Record `json:"items"`
	}
	done, err := o.withStore(ctx, func(s Store) (err error) {
		page.Items, err = s.List(ctx)
		return err
	})
	if !done && err == nil {
		err = o.rest(ctx, http.MethodGet, "/tokens", nil, &page)
	}
	if err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, page); ok {
		return err
	}
	rows := make([][]string, 0, len(page.Items))
	for _, t := range page.Items {
		nss := "*"
		if len(t.Namespaces) > 0 {
			nss = strings.Join(t.Namespaces, ",")
		}
		expires := ""
		if t.ExpiresAt != nil {
			expires = t.ExpiresAt.UTC().Format(time.RFC3339)
		}
		rows = append(rows, []string{t.ID, output.Or(t.Name), t.Role, nss, t.CreatedAt.UTC().Format(time.RFC3339), output.Or(expires)})
	}
	return output.Table(o.F.IO.Out, o.F.IO.OutTerm, []string{"ID", "NAME", "ROLE", "NAMESPACES", "CREATED", "EXPIRES"}, rows)
}

// RevokeOptions are `token revoke`'s inputs.
type RevokeOptions struct {
	*Options
	Name string
}

func newRevoke(o *Options, run func(context.Context, *RevokeOptions) error) *cobra.Command {
	r := &RevokeOptions{Options: o}
	if run == nil {
		run = Revoke
	}
	return &cobra.Command{
		Use: "revoke ID|NAME", Short: "Revoke a token at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				// Every unnamed token has the empty name.
				return cmdutil.Usagef("name the token to revoke by its id or its name: an unnamed token is revoked by its id")
			}
			r.Name = args[0]
			return run(cmd.Context(), r)
		},
	}
}

// Revoke deletes the token.
func Revoke(ctx context.Context, o *RevokeOptions) error {
	done, err := o.withStore(ctx, func(s Store) error { return s.Revoke(ctx, o.Name) })
	if !done && err == nil {
		err = o.rest(ctx, http.MethodDelete, api.Path("tokens", o.Name), nil, nil)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.F.IO.Out, "token %s revoked\n", o.Name)
	return nil
}
