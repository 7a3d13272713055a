package main

import (
	"context"
	"os"

	"github.com/bindery-dev/bindery/cli"
	"github.com/bindery-dev/bindery/internal/startgc"
)

// cliServer hands the server commands to the command line client, which
// lists them in its help and runs them here, with their own flags.
func cliServer() cli.Server {
	cmds := commands()
	summaries := make(map[string]string, len(cmds))
	for n, c := range cmds {
		summaries[n] = c.summary
	}
	return cli.Server{
		Commands: summaries,
		Run: func(ctx context.Context, args []string) error {
			// A server runs for long: the collector's default back.
			startgc.Restore()
			return run(ctx, args, os.Stdout, os.Stderr)
		},
		Tokens: tokenDatabases(env{stdout: os.Stdout, stderr: os.Stderr}),
	}
}
