package main

import (
	"context"
	"fmt"
	"sort"
)

// components are the servers `bindery serve NAME` runs, one per package.
var components = map[string]func(ctx context.Context, e env, args []string) error{
	"apiserver":  runServeAPIServer,
	"broker":     runServeBroker,
	"catalog":    runServeCatalog,
	"controller": runServeController,
	"nodeagent":  runServeNodeagent,
}

func componentNames() []string {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runServe(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("serve: name a component: %v", componentNames())
	}
	run, ok := components[args[0]]
	if !ok {
		return fmt.Errorf("serve: unknown component %q (have %v)", args[0], componentNames())
	}
	return run(ctx, e, args[1:])
}
