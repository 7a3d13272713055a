// Package health is `bindery health URL`: a health check for images
// without a shell or curl, as docker-compose.yaml and probes use it.
package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Options are health's inputs.
type Options struct {
	URL     string
	Timeout time.Duration
	// CACert is a PEM file of the CA certificates that verify an https
	// URL's server, in place of the system's (a server with its own CA,
	// such as the standalone API server).
	CACert string
}

// NewCmd builds the command.
func NewCmd(run func(context.Context, *Options) error) *cobra.Command {
	o := &Options{}
	if run == nil {
		run = Run
	}
	cmd := &cobra.Command{
		Use:   "health URL",
		Short: "Exit 0 when URL/healthz answers 200 (a container health check)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.URL = args[0]
			return run(cmd.Context(), o)
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	cmd.Flags().StringVar(&o.CACert, "cacert", "", "PEM `file` of the CA certificates that verify an https server (default: the system's)")
	return cmd
}

// Run asks the server's /healthz.
func Run(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(o.URL, "/")+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("URL %q: %w", o.URL, err)
	}
	client := http.DefaultClient
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--cacert %s: no PEM certificate in it", o.CACert)
		}
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", o.URL, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/healthz answered %s", o.URL, res.Status)
	}
	return nil
}
