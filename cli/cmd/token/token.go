// Package token is `bindery token list|revoke` over the REST API (admin
// only); `bindery token create` works on the database directly, since the
// first token has to come from somewhere.
package token

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
)

// NewCmd builds `token` with list and revoke; create is added by the
// caller, which owns the database.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Aliases: []string{"tokens"}, Short: "Create (on the database), list and revoke API tokens"}
	cmd.AddCommand(newList(f, nil), newRevoke(f, nil))
	return cmd
}

// ListOptions are `token list`'s inputs.
type ListOptions struct{ F *cmdutil.Factory }

func newList(f *cmdutil.Factory, run func(context.Context, *ListOptions) error) *cobra.Command {
	o := &ListOptions{F: f}
	if run == nil {
		run = List
	}
	return &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List API tokens (never the tokens themselves)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), o) },
	}
}

// List prints the tokens' records.
func List(ctx context.Context, o *ListOptions) error {
	if err := output.Check(o.F.Output); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	var page struct {
		Items []api.Object `json:"items"`
	}
	if err := c.Do(ctx, http.MethodGet, "/tokens", nil, nil, &page); err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.F.Output, page); ok {
		return err
	}
	rows := make([][]string, 0, len(page.Items))
	for _, t := range page.Items {
		var ns []string
		list, _ := t.Get("namespaces").([]any)
		for _, n := range list {
			ns = append(ns, fmt.Sprint(n))
		}
		nss := "*"
		if len(ns) > 0 {
			nss = strings.Join(ns, ",")
		}
		rows = append(rows, []string{t.Str("id"), output.Or(t.Str("name")), t.Str("role"), nss, t.Str("createdAt"), output.Or(t.Str("expiresAt"))})
	}
	return output.Table(o.F.IO.Out, []string{"ID", "NAME", "ROLE", "NAMESPACES", "CREATED", "EXPIRES"}, rows)
}

// RevokeOptions are `token revoke`'s inputs.
type RevokeOptions struct {
	F    *cmdutil.Factory
	Name string
}

func newRevoke(f *cmdutil.Factory, run func(context.Context, *RevokeOptions) error) *cobra.Command {
	o := &RevokeOptions{F: f}
	if run == nil {
		run = Revoke
	}
	return &cobra.Command{
		Use: "revoke ID|NAME", Short: "Revoke a token at once", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
}

// Revoke deletes the token.
func Revoke(ctx context.Context, o *RevokeOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if err := c.Do(ctx, http.MethodDelete, api.Path("tokens", o.Name), nil, nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(o.F.IO.Out, "token %s revoked\n", o.Name)
	return nil
}
