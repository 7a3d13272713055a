package main

import (
	"net"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestListenFlagsChecked: every server refuses a --listen it cannot use,
// naming the flag: an address that is not one, before anything else, and
// one another process holds, when it comes to listen.
func TestListenFlagsChecked(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	env := []string{"DATABASE_URL=" + pgtest.New(t), "BINDERY_ENCRYPTION_KEY=" + keyring.Generate(),
		"BINDERY_BROKER_USERNAME=osb-user", "BINDERY_BROKER_PASSWORD=osb-password-1234"}
	for _, args := range [][]string{
		{"serve", "catalog"}, {"serve", "controller"}, {"serve", "broker"}, {"serve", "apiserver", "--data-dir", t.TempDir()},
		{"serve", "webhook"}, {"serve", "nodeagent", "--csi", "--csi-kubelet-dir", t.TempDir()},
	} {
		bad := []string{"garbage", "127.0.0.1:notaport", "127.0.0.1:99999"}
		if args[1] != "webhook" { // it needs its certificate first
			bad = append(bad, taken.Addr().String())
		}
		for _, bad := range bad {
			t.Run(strings.Join(args[:2], "-")+"/"+bad, func(t *testing.T) {
				p := start(t, env, append(args, "--listen", bad)...)
				if err := p.wait(t); err == nil || !strings.Contains(p.stderr.String(), "--listen") {
					t.Errorf("bindery %s --listen %s: %v; want it refused, naming --listen:\n%s", strings.Join(args, " "), bad, err, p.stderr.String())
				}
			})
		}
	}
}
