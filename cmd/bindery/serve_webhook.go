package main

import (
	"context"

	"github.com/bindery-dev/bindery/nodeagent/servicebinding"
)

// runServeWebhook runs the servicebinding.io webhook and its controller.
func runServeWebhook(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "serve webhook")
	var o servicebinding.Options
	o.AddFlags(fs)
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	log, err := e.logger(*level)
	if err != nil {
		return err
	}
	return o.Run(ctx, log)
}
