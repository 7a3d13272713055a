package osb

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/netnstest"
)

func TestEgressCheck(t *testing.T) {
	t.Parallel()
	allow10 := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		e    Egress
		addr string
		ok   bool
	}{
		{Egress{}, "192.0.2.10", true},
		{Egress{}, "169.254.169.254", false},
		{Egress{}, "::ffff:169.254.169.254", false},
		{Egress{}, "fd00:ec2::254", false},
		{Egress{}, "fe80::1", false},
		{Egress{}, "0.0.0.0", false},
		{Egress{}, "127.0.0.1", false},
		{Egress{}, "::1", false},
		{Egress{AllowLoopback: true}, "127.0.0.1", true},
		{Egress{AllowLoopback: true}, "169.254.169.254", false},
		{Egress{Allow: allow10}, "10.1.2.3", true},
		{Egress{Allow: allow10}, "192.0.2.10", false},
		{Egress{Allow: allow10, Deny: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}, "10.9.1.1", false},
		{Egress{Allow: allow10, AllowLoopback: true}, "127.0.0.1", true},
	} {
		err := tc.e.Check(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.ok {
			t.Errorf("%+v %s: %v, want ok=%v", tc.e, tc.addr, err, tc.ok)
		}
	}
}

// TestEgressOnConnections: the policy is applied to the address a name
// resolves to (localhost here), and redirects are not followed, so neither
// a name nor a 302 leads the client (and its credentials) where the policy
// forbids.
func TestEgressOnConnections(t *testing.T) {
	t.Parallel()
	var redirected bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirected = true
	}))
	defer target.Close()
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/v2/catalog", http.StatusFound)
	}))
	defer broker.Close()

	byName := strings.Replace(broker.URL, "127.0.0.1", "localhost", 1)
	c, err := New(Config{URL: byName, Username: "u", Password: "p", Egress: &Egress{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Catalog(context.Background(), Fetched{}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("catalog through a name for a loopback address: %v, want the egress policy's refusal", err)
	}

	c, err = New(Config{URL: broker.URL, Username: "u", Password: "p", Egress: &Egress{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Catalog(context.Background(), Fetched{}); err == nil {
		t.Fatal("a redirect answered the catalogue")
	}
	if redirected {
		t.Fatal("the client followed the broker's redirect")
	}
}

// TestEgressThisMachine: with loopback denied, an address of this
// machine's own interfaces is refused as loopback is, also one that
// appeared after the policy first looked; another machine's (a network
// namespace's, here) is not. Only addresses this test created (the two
// ends of netnstest's veth pair) are ever connected to.
func TestEgressThisMachine(t *testing.T) {
	t.Parallel()
	e := &Egress{}
	if err := e.Check(netip.MustParseAddr("192.0.2.10")); err != nil {
		t.Fatalf("an address of no machine here: %v", err)
	}
	// The addresses the machine had before: its LAN address, among them.
	// Other tests may remove theirs meanwhile: only one still there after
	// the check counts.
	before, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, a := range before {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		named++
		if err := e.Check(p.Addr()); err == nil && stillHere(t, p.Addr()) {
			t.Errorf("this machine's address %s is allowed with loopback denied", p.Addr())
		} else if err != nil {
			t.Logf("refused: %v", err)
		}
	}
	if named == 0 {
		t.Errorf("the machine has no non-loopback address to try: %v", before)
	}
	ns := netnstest.New(t)
	if err := e.Check(ns.HostIP); err == nil || !strings.Contains(err.Error(), ns.HostIP.String()+" is an address of this machine") {
		t.Errorf("this machine's new address %s: %v", ns.HostIP, err)
	}
	if err := e.Check(ns.IP); err != nil {
		t.Errorf("the namespace's address %s: %v", ns.IP, err)
	}
	if err := (&Egress{AllowLoopback: true, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}).Check(ns.HostIP); err != nil {
		t.Errorf("this machine's address with loopback allowed: %v", err)
	}

	catalog := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"services":[]}`))
	})
	local, err := net.Listen("tcp", net.JoinHostPort(ns.HostIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	here := httptest.NewUnstartedServer(catalog)
	here.Listener.Close()
	here.Listener = local
	here.Start()
	defer here.Close()
	remote, err := ns.Listen("tcp", net.JoinHostPort(ns.IP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	there := httptest.NewUnstartedServer(catalog)
	there.Listener.Close()
	there.Listener = remote
	there.Start()
	defer there.Close()

	for _, tc := range []struct {
		url  string
		want string
	}{
		{here.URL, "is an address of this machine"},
		{there.URL, ""},
	} {
		c, err := New(Config{URL: tc.url, Username: "u", Password: "p", Egress: &Egress{}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Catalog(context.Background(), Fetched{})
		if tc.want == "" && err != nil {
			t.Errorf("catalog from %s: %v", tc.url, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("catalog from %s: %v, want the egress policy's refusal", tc.url, err)
		}
	}
}

// stillHere tells whether addr is an address of this machine's
// interfaces now.
func stillHere(t *testing.T, addr netip.Addr) bool {
	t.Helper()
	now, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range now {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == addr {
			return true
		}
	}
	return false
}

// BenchmarkEgressCheck is the cost of the policy per new connection to a
// broker when no interface changed meanwhile.
func BenchmarkEgressCheck(b *testing.B) {
	e := &Egress{}
	addr := netip.MustParseAddr("192.0.2.10")
	for b.Loop() {
		if err := e.Check(addr); err != nil {
			b.Fatal(err)
		}
	}
}
