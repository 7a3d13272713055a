package cni_test

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/bindery-dev/bindery/nodeagent/cni"
)

// BenchmarkAdd measures what bindery-cni adds to a Pod's ADD: each
// iteration runs ADD of the bridge chain alone and of the chain with
// bindery-cni after it, side by side, and reports the medians of both and
// the median and 99th percentile of their differences (added-*). grants is
// the number of granted endpoints, each with a port and a port range.
func BenchmarkAdd(b *testing.B) {
	for _, grants := range []int{1, 50} {
		b.Run("grants="+strconv.Itoa(grants), func(b *testing.B) {
			l := setup(b)
			// A managed range wide enough for 50 distinct addresses.
			l.managed = append(l.managed, netip.MustParsePrefix("198.19.128.0/24"))
			var eps []cni.Endpoint
			for i := range grants {
				eps = append(eps, cni.Endpoint{Host: fmt.Sprintf("198.19.128.%d", i+1), Ports: []string{"5432", "6000-6010"}, Protocol: "tcp"})
			}
			alone, chained := l.conflist("1.1.0", false), l.conflist("1.1.0", true)
			p := l.newPod(eps)
			var tAlone, tChained, added []float64
			run := func(list *libcni.NetworkConfigList) float64 {
				start := time.Now()
				if _, err := l.cni.AddNetworkList(ctx(b), list, p.rt); err != nil {
					b.Fatalf("ADD: %v", err)
				}
				d := time.Since(start)
				b.StopTimer()
				if err := l.cni.DelNetworkList(ctx(b), list, p.rt); err != nil {
					b.Fatalf("DEL: %v", err)
				}
				b.StartTimer()
				return float64(d.Microseconds()) / 1000
			}
			b.ResetTimer()
			for b.Loop() {
				a := run(alone)
				c := run(chained)
				tAlone, tChained, added = append(tAlone, a), append(tChained, c), append(added, c-a)
			}
			b.ReportMetric(quantile(tAlone, 0.5), "bridge-p50-ms")
			b.ReportMetric(quantile(tChained, 0.5), "chain-p50-ms")
			b.ReportMetric(quantile(added, 0.5), "added-p50-ms")
			b.ReportMetric(quantile(added, 0.99), "added-p99-ms")
		})
	}
}

// BenchmarkThroughput compares TCP throughput over the bridge and veth from
// a Pod without bindery-cni and from a Pod whose rules grant the endpoint,
// writing 4 MiB to each in turn per iteration, in alternating order.
func BenchmarkThroughput(b *testing.B) {
	l := setup(b)
	port := sink(b, l)
	alone, chained := l.conflist("1.1.0", false), l.conflist("1.1.0", true)
	plain := l.newPod(nil)
	granted := l.newPod([]cni.Endpoint{{Host: l.svc.IP.String(), Ports: []string{strconv.Itoa(port)}}})
	if _, err := l.cni.AddNetworkList(ctx(b), alone, plain.rt); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(b), alone, plain.rt) })
	if _, err := l.cni.AddNetworkList(ctx(b), chained, granted.rt); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.cni.DelNetworkList(ctx(b), chained, granted.rt) })
	dial := func(p *pod) net.Conn {
		var c net.Conn
		if err := p.ns.Do(func(ns.NetNS) error {
			var err error
			c, err = net.DialTimeout("tcp", netip.AddrPortFrom(l.svc.IP, uint16(port)).String(), time.Second)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	cPlain, cGranted := dial(plain), dial(granted)
	buf := make([]byte, 4<<20)
	var dPlain, dGranted time.Duration
	send := func(c net.Conn) time.Duration {
		start := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.SetBytes(int64(2 * len(buf)))
	b.ResetTimer()
	i := 0
	for b.Loop() {
		// Turns about, so neither always goes first.
		if i%2 == 0 {
			dPlain += send(cPlain)
			dGranted += send(cGranted)
		} else {
			dGranted += send(cGranted)
			dPlain += send(cPlain)
		}
		i++
	}
	mb := float64(b.N) * float64(len(buf)) / 1e6
	b.ReportMetric(mb/dPlain.Seconds(), "plain-MB/s")
	b.ReportMetric(mb/dGranted.Seconds(), "granted-MB/s")
	b.ReportMetric(dPlain.Seconds()/dGranted.Seconds(), "granted/plain")
}

// sink accepts connections on the service and discards what they send.
func sink(b *testing.B, l *lab) int {
	ln, err := l.svc.Listen("tcp", netip.AddrPortFrom(l.svc.IP, 0).String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// quantile returns the q-quantile of xs (nearest rank).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
