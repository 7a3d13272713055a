package osb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
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
	if _, err := c.Catalog(context.Background()); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("catalog through a name for a loopback address: %v, want the egress policy's refusal", err)
	}

	c, err = New(Config{URL: broker.URL, Username: "u", Password: "p", Egress: &Egress{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Catalog(context.Background()); err == nil {
		t.Fatal("a redirect answered the catalogue")
	}
	if redirected {
		t.Fatal("the client followed the broker's redirect")
	}
}
