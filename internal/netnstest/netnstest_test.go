package netnstest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestListen serves HTTP from the test process on a listener in the
// namespace: the host reaches it at the namespace's address and not on
// loopback, and the handler still reaches a loopback server on the host.
func TestListen(t *testing.T) {
	t.Parallel()
	ns := New(t)

	hostOnly := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from the host's loopback")
	}))
	t.Cleanup(hostOnly.Close)

	token := rand.Text()
	l, err := ns.Listen("tcp", netip.AddrPortFrom(ns.IP, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(hostOnly.URL)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		loopback, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(w, "%s %s %s", token, r.RemoteAddr, loopback)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)

	addr := netip.MustParseAddrPort(l.Addr().String())
	if addr.Addr() != ns.IP {
		t.Fatalf("listener address %s, want an address on %s", addr, ns.IP)
	}
	body := get(t, "http://"+addr.String())
	remote, loopback, _ := strings.Cut(strings.TrimPrefix(body, token+" "), " ")
	if !strings.HasPrefix(body, token+" ") {
		t.Fatalf("GET %s = %q, want the test's server", addr, body)
	}
	if from := netip.MustParseAddrPort(remote).Addr(); from != ns.HostIP {
		t.Errorf("request came from %s, want the host's end of the veth, %s", from, ns.HostIP)
	}
	if loopback != "from the host's loopback" {
		t.Errorf("handler got %q from the host's loopback server", loopback)
	}

	// Something else of the host's may happen to listen on the same port on
	// loopback; only an answer from this test's server would be wrong.
	onLoopback := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addr.Port())
	client := &http.Client{Timeout: 2 * time.Second}
	if resp, err := client.Get("http://" + onLoopback.String()); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), token) {
			t.Errorf("the namespace's server answered on %s", onLoopback)
		}
	}
}

// TestParallel creates namespaces at the same time, as tests in parallel
// packages do: each gets its own names and a subnet of its own.
func TestParallel(t *testing.T) {
	t.Parallel()
	ip := ipCommand(t)
	created := make([]*Namespace, 4)
	errs := make([]error, len(created))
	var wg sync.WaitGroup
	for i := range created {
		wg.Go(func() { created[i], errs[i] = create(ip, os.Getpid(), randomSlot) })
	}
	wg.Wait()
	for i, ns := range created {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		t.Cleanup(func() {
			if err := ns.remove(t.Logf); err != nil {
				t.Error(err)
			}
		})
	}
	if t.Failed() {
		return
	}
	for i, a := range created {
		for _, b := range created[i+1:] {
			if a.Name == b.Name || a.hostVeth == b.hostVeth {
				t.Errorf("two namespaces share names: %+v and %+v", a, b)
			}
			if subnet(a).Overlaps(subnet(b)) {
				t.Errorf("subnets overlap: %s and %s", subnet(a), subnet(b))
			}
		}
	}
}

// TestTakenSlot checks that create moves on from a slot another process
// holds, whether it shows as a veth of the slot's name or as a route.
func TestTakenSlot(t *testing.T) {
	t.Parallel()
	ip := ipCommand(t)
	tests := []struct {
		name string
		take func(t *testing.T, slot int) error
	}{
		{"veth name", func(t *testing.T, slot int) error {
			return addLink(t, ip, vethName(slot))
		}},
		{"route", func(t *testing.T, slot int) error {
			name := fmt.Sprintf("bindtest-%04x", slot)
			if err := addLink(t, ip, name); err != nil {
				return err
			}
			for _, args := range [][]string{
				{"addr", "add", slotPrefix(slot).String(), "dev", name},
				{"link", "set", name, "up"},
			} {
				if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
					t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
				}
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			taken := randomSlot()
			for tt.take(t, taken) != nil {
				taken = randomSlot()
			}
			picks := []int{taken, taken}
			ns, err := create(ip, os.Getpid(), func() int {
				if len(picks) == 0 {
					return randomSlot()
				}
				s := picks[0]
				picks = picks[1:]
				return s
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := ns.remove(t.Logf); err != nil {
					t.Error(err)
				}
			})
			if subnet(ns) == slotPrefix(taken) {
				t.Errorf("create used the taken slot %s", slotPrefix(taken))
			}
			if len(picks) != 0 {
				t.Errorf("create tried the taken slot once, want twice")
			}
		})
	}
}

// TestDo runs code inside the namespace: it sees the namespace's interfaces,
// and so does a process it starts, while the caller stays on the host.
func TestDo(t *testing.T) {
	t.Parallel()
	ns := New(t)
	var (
		inside []string
		addrs  []netip.Prefix
		ipAddr []byte
	)
	err := ns.Do(func() error {
		ifaces, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, iface := range ifaces {
			inside = append(inside, iface.Name)
			as, err := iface.Addrs()
			if err != nil {
				return err
			}
			for _, a := range as {
				addrs = append(addrs, netip.MustParsePrefix(a.String()))
			}
		}
		ipAddr, err = exec.Command(ns.ip, "-o", "-4", "addr").CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(inside)
	if want := []string{"lo", nsVeth}; !slices.Equal(inside, want) {
		t.Errorf("interfaces inside = %v, want %v", inside, want)
	}
	if want := netip.PrefixFrom(ns.IP, subnetBits); !slices.Contains(addrs, want) {
		t.Errorf("addresses inside = %v, want %s among them", addrs, want)
	}
	if !strings.Contains(string(ipAddr), ns.IP.String()+"/") || strings.Contains(string(ipAddr), ns.HostIP.String()+"/") {
		t.Errorf("ip addr started inside shows:\n%s\nwant %s and not %s", ipAddr, ns.IP, ns.HostIP)
	}

	if _, err := net.InterfaceByName(ns.hostVeth); err != nil {
		t.Errorf("after Do, the caller does not see the host's veth %s: %v", ns.hostVeth, err)
	}

	want := fmt.Errorf("from f")
	if err := ns.Do(func() error { return want }); err != want {
		t.Errorf("Do returned %v, want f's error", err)
	}
}

// TestSweep leaves namespaces behind as a test process that was killed
// would, and checks that sweep removes them with their veth pairs, and
// nothing else: not a live process's namespace, not a veth whose slot a live
// process holds, not a name that New does not make.
func TestSweep(t *testing.T) {
	t.Parallel()
	ip := ipCommand(t)
	live, err := create(ip, os.Getpid(), randomSlot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := live.remove(t.Logf); err != nil {
			t.Error(err)
		}
	})
	_, liveSlot, _ := parseName(live.Name)

	// The owner lives until its namespaces are complete, so that the sweep
	// of another test process starting meanwhile cannot take them half made.
	owner := exec.Command("sleep", "3600")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	dead := owner.Process.Pid
	t.Cleanup(func() { owner.Process.Kill(); owner.Wait() })
	leftover, err := create(ip, dead, randomSlot)
	if err != nil {
		t.Fatal(err)
	}
	// The owner died after `ip netns add`, before the veth, whose slot a
	// live process holds.
	noVeth := &Namespace{Name: nsName(dead, liveSlot), ip: ip, hostVeth: live.hostVeth}
	if err := noVeth.run("netns", "add", noVeth.Name); err != nil {
		t.Fatal(err)
	}
	other := &Namespace{Name: nsName(dead, liveSlot) + "-x", ip: ip}
	if err := other.run("netns", "add", other.Name); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Namespace{leftover, noVeth} {
		t.Cleanup(func() {
			if err := n.removeLeftover(t.Logf, dead); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(func() {
		if err := other.run("netns", "delete", other.Name); err != nil {
			t.Error(err)
		}
	})
	owner.Process.Kill()
	owner.Wait()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", dead)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("process %d still shows in /proc after it ended: %v", dead, err)
	}

	sweep(ip, t.Logf)

	for _, tt := range []struct {
		what    string
		present bool
		want    bool
	}{
		{"namespace " + leftover.Name, exists(leftover.path()), false},
		{"veth " + leftover.hostVeth, linkExists(leftover.hostVeth), false},
		{"namespace " + noVeth.Name, exists(noVeth.path()), false},
		{"namespace " + other.Name + ", not a name of New's", exists(other.path()), true},
		{"namespace " + live.Name + " of this process", exists(live.path()), true},
		{"veth " + live.hostVeth + " of this process", linkExists(live.hostVeth), true},
	} {
		if tt.present != tt.want {
			t.Errorf("after sweep, %s present = %t, want %t", tt.what, tt.present, tt.want)
		}
	}
}

// TestParseName checks that sweep takes only the names that nsName makes.
func TestParseName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		pid, slot int
		ok        bool
	}{
		{"bindery-4242-00af", 4242, 0xaf, true},
		{"bindery-1-7fff", 1, 0x7fff, true},
		{"bindery-4242-8000", 0, 0, false}, // beyond the pool
		{"bindery-4242-00AF", 0, 0, false},
		{"bindery-4242-0af", 0, 0, false},
		{"bindery-4242-000af", 0, 0, false},
		{"bindery-04242-00af", 0, 0, false},
		{"bindery-+4242-00af", 0, 0, false},
		{"bindery-0-00af", 0, 0, false},
		{"bindery--1-00af", 0, 0, false},
		{"bindery-4242-00af-x", 0, 0, false},
		{"bindery-00af", 0, 0, false}, // a host veth's name
		{"bindery-4242", 0, 0, false},
		{"other-4242-00af", 0, 0, false},
	}
	for _, tt := range tests {
		pid, slot, ok := parseName(tt.name)
		if ok != tt.ok || ok && (pid != tt.pid || slot != tt.slot) {
			t.Errorf("parseName(%q) = %d, %#x, %t, want %d, %#x, %t", tt.name, pid, slot, ok, tt.pid, tt.slot, tt.ok)
		}
	}
}

// BenchmarkCreateRemove measures setting up and tearing down one namespace.
func BenchmarkCreateRemove(b *testing.B) {
	ip := ipCommand(b)
	for b.Loop() {
		ns, err := create(ip, os.Getpid(), randomSlot)
		if err != nil {
			b.Fatal(err)
		}
		if err := ns.remove(b.Logf); err != nil {
			b.Fatal(err)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

func subnet(ns *Namespace) netip.Prefix { return netip.PrefixFrom(ns.IP, subnetBits).Masked() }

func get(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// addLink creates a veth (its peer named by the kernel) that t removes when
// it ends, or returns the error when the name is taken.
func addLink(t *testing.T, ip, name string) error {
	out, err := exec.Command(ip, "link", "add", name, "type", "veth").CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "File exists") {
			return fmt.Errorf("%s: %s", name, out)
		}
		t.Fatalf("ip link add %s type veth: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "link", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip link delete %s: %v: %s", name, err, out)
		}
	})
	return nil
}
