// Package login is `bindery login URL`: the token comes from BINDERY_TOKEN
// or standard input, never from the command line, where `ps` and the shell's
// history would show it.
package login

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

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
	// ReadSecret reads a line without echoing it, when standard input is a
	// terminal; nil reads a plain line from F.IO.In.
	ReadSecret func() (string, error)
}

// NewCmd builds the command; run replaces Run in tests.
func NewCmd(f *cmdutil.Factory, run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{F: f}
	if run == nil {
		run = Run
	}
	cmd := &cobra.Command{
		Use:   "login URL",
		Short: "Save the server and token the other commands use",
		Long: "Checks the token against the server and saves both in $XDG_CONFIG_HOME/bindery/config.yaml (mode 0600).\n" +
			"URL is the web UI's or the REST API's address, with or without /api/v1.\n" +
			"The token is read from BINDERY_TOKEN, else from standard input (asked for, without echo, on a terminal).\n" +
			"BINDERY_URL and BINDERY_TOKEN override the saved values.",
		Example: "  bindery login http://127.0.0.1:8080        # paste the token when asked\n" +
			"  bindery token create --role admin | bindery login http://127.0.0.1:8080",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.URL = args[0]
			if o.ReadSecret == nil {
				o.ReadSecret = cmdutil.SecretPrompt(o.F, "API token: ")
			}
			return run(cmd.Context(), o)
		},
	}
	// Kept for scripts written before the token moved off the command line.
	cmd.Flags().StringVar(&o.Token, "token", "", "an API token (visible to other users in ps: prefer BINDERY_TOKEN or standard input)")
	_ = cmd.Flags().MarkHidden("token")
	return cmd
}

// ServerURL turns what a person may paste — the web UI's address or the
// REST API's, with or without /api/v1 and a trailing slash — into the
// server's base URL.
func ServerURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", cmdutil.Usagef("%q is not a Bindery address: give the web UI's or REST API's URL, such as http://127.0.0.1:8080", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/api/v1")
	u.Path, u.RawPath, u.RawQuery, u.Fragment = strings.TrimRight(p, "/"), "", "", ""
	return u.String(), nil
}

// Run checks the token by listing brokers (any role may) and saves.
func Run(ctx context.Context, o *Options) error {
	base, err := ServerURL(o.URL)
	if err != nil {
		return err
	}
	token, err := o.token()
	if err != nil {
		return err
	}
	c := api.New(base, token)
	if err := c.Do(ctx, "GET", "/brokers", url.Values{"limit": {"1"}}, nil, nil); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return fmt.Errorf("%s did not accept the token: %w", base, err)
		}
		return err
	}
	p, err := config.Save(o.F.Getenv, config.Config{URL: base, Token: token})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.F.IO.ErrOut, "Logged in to %s; saved in %s\n", base, p)
	return nil
}

// token is --token, else BINDERY_TOKEN, else the first line of standard input.
func (o *Options) token() (string, error) {
	t := o.Token
	if t == "" {
		t = o.F.Getenv("BINDERY_TOKEN")
	}
	if t == "" {
		var err error
		if t, err = cmdutil.ReadSecret(o.F, o.ReadSecret); err != nil {
			return "", fmt.Errorf("read the token from standard input: %w", err)
		}
	}
	if t = strings.TrimSpace(t); t == "" {
		return "", cmdutil.Usagef("no token: set BINDERY_TOKEN or give it on standard input (make one with `bindery token create --role viewer|developer|admin`)")
	}
	return t, nil
}
