package deviceplugin_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The figures issue 7 asks for:
//
//	go test ./nodeagent/deviceplugin/ -run '^$' -bench Allocate -benchtime 10000x
//	go test ./nodeagent/deviceplugin/ -run '^$' -bench 'Restart|Removal' -benchtime 200x

// BenchmarkAllocate measures Allocate as the kubelet calls it, over gRPC on
// the unix socket, after 1,000 warm-up calls.
func BenchmarkAllocate(b *testing.B) {
	bb := setup(b, setupOpts{files: []string{"foo-0", "foo-1"}})
	c, err := bb.kubelet.Client(resource)
	must(b, err)
	ctx := context.Background()
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"foo-1"}}}}
	for range 1000 {
		_, err := c.Allocate(ctx, req)
		must(b, err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		_, err := c.Allocate(ctx, req)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, lat, time.Microsecond, "µs")
}

// BenchmarkKubeletRestartToRegistration measures, for each kubelet
// restart, the time from the new kubelet.sock accepting connections to the
// plugin registered again and its device list received.
func BenchmarkKubeletRestartToRegistration(b *testing.B) {
	bb := setup(b, setupOpts{files: []string{"foo-0"}})
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		must(b, bb.kubelet.Restart())
		started := bb.kubelet.StartedAt()
		waitCtx(b, 5*time.Second, func(ctx context.Context) error {
			return bb.kubelet.WaitRegistered(ctx, resource, i+2)
		})
		lat = append(lat, time.Since(started))
	}
	b.StopTimer()
	report(b, lat, time.Millisecond, "ms")
}

// BenchmarkDeviceRemovalToUnhealthy measures the time from deleting a
// device file to the kubelet receiving it as Unhealthy on ListAndWatch.
func BenchmarkDeviceRemovalToUnhealthy(b *testing.B) {
	bb := setup(b, setupOpts{files: []string{"foo-0", "foo-1"}})
	foo1 := filepath.Join(bb.devDir, "foo-1")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		must(b, os.Remove(foo1))
		waitCtx(b, 5*time.Second, func(ctx context.Context) error {
			return bb.kubelet.WaitHealth(ctx, resource, "foo-1", unhealthy)
		})
		lat = append(lat, time.Since(start))

		b.StopTimer()
		touch(b, foo1)
		waitCtx(b, 5*time.Second, func(ctx context.Context) error {
			return bb.kubelet.WaitHealth(ctx, resource, "foo-1", healthy)
		})
		b.StartTimer()
	}
	b.StopTimer()
	report(b, lat, time.Microsecond, "µs")
}

// report adds the median, 99th percentile and maximum of lat, in unit.
func report(b *testing.B, lat []time.Duration, unit time.Duration, name string) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(unit)
	}
	b.ReportMetric(at(0.50), "p50-"+name)
	b.ReportMetric(at(0.99), "p99-"+name)
	b.ReportMetric(float64(lat[len(lat)-1])/float64(unit), "max-"+name)
	b.ReportMetric(float64(len(lat)), "samples")
}
