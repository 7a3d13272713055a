// Command pause is the sandbox ("infra") container of the test node's Pods:
// it holds the Pod's namespaces open, reaps the zombies of processes that
// end up as its children (it is PID 1 in a shared PID namespace), and exits
// on SIGINT or SIGTERM. It is built static and put in an image by
// internal/ociimage, so the node needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited; one SIGCHLD may stand for
// several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
