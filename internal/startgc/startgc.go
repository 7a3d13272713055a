// Package startgc turns the garbage collector off from the moment it is
// initialised, which is before the heavy packages of the bindery binary
// are (Kubernetes' API schemes, the JSON Schema meta-schemas, the metrics
// registries), until a server command calls Restore.
//
// The binary is also the command line client, a process that lives a few
// tens of milliseconds: with the runtime's default, four collections ran
// while packages initialised and more while a long list was decoded, for
// memory the process returns at exit anyway. Off, the heap is still
// collected when it reaches MemoryLimit.
//
// It works because the Go specification initialises packages in the order
// of their import paths among those whose imports are ready: this package
// imports only the runtime's, so it comes before every module path that
// sorts after github.com/bindery-dev (google.golang.org, k8s.io,
// sigs.k8s.io, github.com/santhosh-tekuri, ...). GOGC or GOMEMLIMIT set in
// the environment win: then it does nothing.
package startgc

import (
	"math"
	"os"
	"runtime/debug"
)

// MemoryLimit is the heap size at which the collector runs while it is
// otherwise off.
const MemoryLimit = 128 << 20

// off tells whether init turned the collector off; restored whether
// Restore ran.
var off, restored bool

func init() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(MemoryLimit)
	debug.SetGCPercent(-1)
	off = true
}

// Restore gives the runtime's default collection back (GOGC=100), for a
// process that will run for long: a server, with a soft memory limit of
// nine tenths of its cgroup's memory limit when it runs under one (a
// container's limit) and GOMEMLIMIT does not set another. Only its first
// call does anything.
func Restore() {
	if restored {
		return
	}
	restored = true
	if off {
		debug.SetGCPercent(100)
		off = false
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		limit := int64(math.MaxInt64)
		if l, ok := cgroupMemoryLimit(cgroupRoot); ok {
			limit = softLimit(l)
		}
		debug.SetMemoryLimit(limit)
	}
}
