package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bindery-dev/bindery/apiserver"
	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/client/clientset/versioned"
	"github.com/bindery-dev/bindery/client/clientset/versioned/scheme"
	"github.com/bindery-dev/bindery/internal/kubetest"
)

// BenchmarkWatch1000Remote is BenchmarkWatch1000Steady with the server and
// the clients each in a process of their own: `bindery serve apiserver`
// (standalone), and 1,000 watches (half with a label selector that matches
// every other object) through client-go's REST client in another process
// that reads and parses every event (TestHelperWatchClients). The writes,
// through catalog.Store from this process, are 50 ms apart (20 a second).
// Reported (watch1000): the time from just before each write to each
// watcher's event (min, p10, p50, p99, max), the events delivered, and the
// CPU of the server and of the clients' process per delivered event: the
// server's is its cost, which the clients' decoding on the same two cores
// does not count in. BINDERY_WATCH_PARSE=none has the clients find each
// event's name without parsing it: what is left is the transport's.
func BenchmarkWatch1000Remote(b *testing.B) {
	store := apiserver.NewTestStore(b)
	apiserver.RegisterFakeBroker(b, store)
	srv := startServerProcess(b, netip.MustParseAddr("127.0.0.1"), apiserver.PoolOf(store).Config().ConnString(), "", "")
	ctx := context.Background()
	watch1000(b, filepath.Join(srv.dataDir, "kubeconfig"), "servicecatalog.k8s.io", srv.pid(), func(name string, labels map[string]string) error {
		_, err := store.CreateInstance(ctx, watchedInstance(name, labels))
		return err
	})
}

// BenchmarkWatch1000RemoteCRD is BenchmarkWatch1000Remote against
// kube-apiserver: the same clients watch the objects of a CRD of the same
// shape (benchCRD), created through kube-apiserver (and so etcd) 20 a
// second, each with the spec and status of a ServiceInstance as Bindery
// serves it. The server's CPU is kube-apiserver's (etcd's is per write,
// not per event). It says what Kubernetes' own server does with the same
// watchers on the same machine.
func BenchmarkWatch1000RemoteCRD(b *testing.B) {
	template := servedInstance(b)
	cluster := kubetest.Start(b)
	kubectl := func(stdin []byte, args ...string) {
		if out, err := cluster.KubectlAs(b, kubetest.Admin, stdin, args...); err != nil {
			b.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	kubectl([]byte(benchCRD), "apply", "-f", "-")
	kubectl(nil, "wait", "--for=condition=Established", "crd/serviceinstances.bench.bindery.dev", "--timeout=30s")
	kubectl(nil, "create", "namespace", "team")
	dyn, err := dynamic.NewForConfig(cluster.Config())
	if err != nil {
		b.Fatal(err)
	}
	crd := dyn.Resource(schema.GroupVersionResource{Group: "bench.bindery.dev", Version: "v1beta1", Resource: "serviceinstances"}).Namespace("team")
	ctx := context.Background()
	watch1000(b, cluster.Kubeconfig(), "bench.bindery.dev", cluster.PID("kube-apiserver"), func(name string, labels map[string]string) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bench.bindery.dev/v1beta1", "kind": "ServiceInstance",
			"metadata": map[string]any{"name": name, "namespace": "team"},
			"spec":     template["spec"], "status": template["status"],
		}}
		obj.SetLabels(labels)
		_, err := crd.Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
}

// watchedInstance is the instance each of the watch benchmarks' writes
// creates.
func watchedInstance(name string, labels map[string]string) *catalog.Instance {
	in := &catalog.Instance{Spec: catalog.InstanceSpec{ClusterServiceClassExternalName: "fake-service", ClusterServicePlanExternalName: "sync"}}
	in.Name, in.Namespace, in.Labels = name, "team", labels
	return in
}

// servedInstance is one watchedInstance as `bindery serve apiserver`
// serves it, as unstructured content.
func servedInstance(b *testing.B) map[string]any {
	b.Helper()
	store := apiserver.NewTestStore(b)
	apiserver.RegisterFakeBroker(b, store)
	srv := startServerProcess(b, netip.MustParseAddr("127.0.0.1"), apiserver.PoolOf(store).Config().ConnString(), "", "")
	defer srv.stop()
	ctx := context.Background()
	if _, err := store.CreateInstance(ctx, watchedInstance("template", nil)); err != nil {
		b.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(srv.dataDir, "kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	in, err := sc.ServicecatalogV1beta1().ServiceInstances("team").Get(ctx, "template", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// watch1000 runs 1,000 watches of group's serviceinstances through
// kubeconfig in a process of their own, calls create b.N times 50 ms
// apart (every other object labelled parity=odd, which half the watches
// select) and reports the latencies and the CPU per delivered event of
// the process server and of the clients.
func watch1000(b *testing.B, kubeconfig, group string, server int, create func(name string, labels map[string]string) error) {
	clients := startWatchClients(b, kubeconfig, group, 1000)
	sent := map[string]time.Time{}
	want := 0
	srvCPU0, cliCPU0 := processCPU(b, server), processCPU(b, clients.cmd.Process.Pid)
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("w-%d", i)
		var labels map[string]string
		want += 500
		if i%2 == 1 {
			labels = map[string]string{"parity": "odd"}
			want += 500
		}
		sent[name] = time.Now()
		if err := create(name, labels); err != nil {
			b.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	arrived := clients.wait(b, want)
	b.StopTimer()
	srvCPU, cliCPU := processCPU(b, server)-srvCPU0, processCPU(b, clients.cmd.Process.Pid)-cliCPU0
	var lat []time.Duration
	for _, a := range arrived {
		lat = append(lat, a.at.Sub(sent[a.name]))
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[0]), "min-ms")
	b.ReportMetric(ms(lat[len(lat)/10]), "p10-ms")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(float64(len(lat)), "events")
	b.ReportMetric(float64(srvCPU.Microseconds())/float64(len(lat)), "server-cpu-us/event")
	b.ReportMetric(float64(cliCPU.Microseconds())/float64(len(lat)), "clients-cpu-us/event")
}

// watchClients is the process of TestHelperWatchClients.
type watchClients struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	events []arrival
	done   chan struct{}
}

type arrival struct {
	name string
	at   time.Time
}

// startWatchClients starts n watchers in a process of their own (this test
// binary, running TestHelperWatchClients) and returns once all watch.
func startWatchClients(b *testing.B, kubeconfig, group string, n int) *watchClients {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWatchClients$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), "BINDERY_WATCH_CLIENTS="+strconv.Itoa(n), "BINDERY_WATCH_KUBECONFIG="+kubeconfig, "BINDERY_WATCH_GROUP="+group)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c := &watchClients{cmd: cmd, done: make(chan struct{})}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.stdin.Close()
		_ = cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		defer close(c.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			line := s.Text()
			if line == "watching" {
				close(ready)
				continue
			}
			name, at, ok := strings.Cut(line, " ")
			ns, err := strconv.ParseInt(at, 10, 64)
			if !ok || err != nil {
				continue // the test framework's own lines
			}
			c.mu.Lock()
			c.events = append(c.events, arrival{name, time.Unix(0, ns)})
			c.mu.Unlock()
		}
	}()
	select {
	case <-ready:
	case <-c.done:
		b.Fatal("the watch clients ended before watching")
	case <-time.After(5 * time.Minute):
		b.Fatal("the watch clients did not watch within 5 minutes")
	}
	return c
}

// wait waits until want events have arrived and returns them.
func (c *watchClients) wait(b *testing.B, want int) []arrival {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c.mu.Lock()
		n := len(c.events)
		c.mu.Unlock()
		if n >= want {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d events arrived", n, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// TestHelperWatchClients is the process of BenchmarkWatch1000Remote's
// clients, and skips otherwise: BINDERY_WATCH_CLIENTS watches of
// BINDERY_WATCH_GROUP's v1beta1 serviceinstances through
// BINDERY_WATCH_KUBECONFIG (every other one with a label selector), from
// a list's resourceVersion; it prints "watching" once all are open, then
// "NAME UNIXNANO" for each ADDED event as it arrives, until its stdin
// closes.
//
// The watches go through client-go's REST client and transport, as a
// typed client's do (the same HTTP/2 connections, TLS and credentials),
// but each reads its stream with a lean decoder: every frame is read whole
// off the wire and parsed as JSON (encoding/json, which checks all of it),
// keeping only the event's type and the object's name. client-go's typed
// decoding into a ServiceInstance cost the clients twice the server's CPU
// per event, on the same two cores: the server's figure is what is
// measured, the clients' decoding only competes with it. With
// BINDERY_WATCH_PARSE=none, the name is found in each frame without
// parsing it.
func TestHelperWatchClients(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("BINDERY_WATCH_CLIENTS"))
	if err != nil {
		t.Skip("run by BenchmarkWatch1000Remote")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("BINDERY_WATCH_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	sc, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := sc.ServicecatalogV1beta1().RESTClient()
	path := []string{"/apis", os.Getenv("BINDERY_WATCH_GROUP"), "v1beta1", "serviceinstances"}
	raw, err := rc.Get().AbsPath(path...).Param("limit", "1").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list metav1.PartialObjectMetadataList
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	read := readWatch
	if os.Getenv("BINDERY_WATCH_PARSE") == "none" {
		read = scanWatch
	}
	out := make(chan string, 4096)
	var wg sync.WaitGroup
	for i := range n {
		opts := metav1.ListOptions{ResourceVersion: list.ResourceVersion, Watch: true}
		if i%2 == 1 {
			opts.LabelSelector = "parity=odd"
		}
		body, err := rc.Get().AbsPath(path...).VersionedParams(&opts, scheme.ParameterCodec).Stream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer body.Close()
			read(body, out)
		})
	}
	fmt.Println("watching")
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	go func() {
		wg.Wait()
		close(out)
	}()
	w := bufio.NewWriter(os.Stdout)
	for line := range out {
		fmt.Fprintln(w, line)
		if len(out) == 0 {
			w.Flush()
		}
	}
	w.Flush()
}

// readWatch parses a watch's JSON stream, one event at a time, and sends
// "NAME UNIXNANO" to out for each ADDED, until the stream ends.
func readWatch(body io.Reader, out chan<- string) {
	dec := json.NewDecoder(body)
	for {
		var ev struct {
			Type   watch.EventType
			Object struct {
				Metadata struct{ Name string }
			}
		}
		if err := dec.Decode(&ev); err != nil {
			return
		}
		if ev.Type == watch.Added {
			out <- ev.Object.Metadata.Name + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
		}
	}
}

// scanWatch is readWatch without parsing: each frame (one line of the
// stream) is read whole, and an ADDED event's name is the first
// "name" member's value.
func scanWatch(body io.Reader, out chan<- string) {
	r := bufio.NewReaderSize(body, 64<<10)
	added, name := []byte(`{"type":"ADDED"`), []byte(`"name":"`)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		i := bytes.Index(line, name)
		if !bytes.HasPrefix(line, added) || i < 0 {
			continue
		}
		v := line[i+len(name):]
		if j := bytes.IndexByte(v, '"'); j >= 0 {
			out <- string(v[:j]) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
		}
	}
}
