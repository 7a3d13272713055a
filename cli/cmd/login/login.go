// Package login is `bindery login URL --token TOKEN`.
package login

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/config"
)

// Options are login's inputs.
type Options struct {
	F     *cmdutil.Factory
	URL   string
	Token string
}

// NewCmd builds the command; run replaces Run in tests.
func NewCmd(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Run
	}
	cmd := &cobra.Command{
		Use:   "login URL --token TOKEN",
		Short: "Save the server and token the other commands use",
		Long: "Checks the token against the server and saves both in $XDG_CONFIG_HOME/bindery/config.yaml (mode 0600).\n" +
			"BINDERY_URL and BINDERY_TOKEN override the saved values.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.URL = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Token, "token", "", "an API token (from `bindery token create`)")
	return cmd
}

// Run checks the token by listing brokers (any role may) and saves.
func Run(ctx context.Context, o *Options) error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cmdutil.Usagef("URL %q: want http(s)://HOST[:PORT], the address of `bindery serve catalog` or `bindery up`", o.URL)
	}
	if o.Token == "" {
		return cmdutil.Usagef("--token is required: make one with `bindery token create --role viewer|developer|admin`")
	}
	c := api.New(o.URL, o.Token)
	if err := c.Do(ctx, "GET", "/brokers", url.Values{"limit": {"1"}}, nil, nil); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return fmt.Errorf("%s refused the token: %w", o.URL, err)
		}
		return err
	}
	p, err := config.Save(o.F.Getenv, config.Config{URL: o.URL, Token: o.Token})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.F.IO.ErrOut, "Logged in to %s; saved in %s\n", o.URL, p)
	return nil
}
