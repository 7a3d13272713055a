// Package kubelettest plays the kubelet's device manager for device plugin
// tests, following kubernetes/kubernetes pkg/kubelet/cm/devicemanager
// (plugin/v1beta1 server.go, handler.go, client.go and manager.go):
//
//   - on start it removes every file in the device-plugin directory, then
//     serves the Registration service on kubelet.sock;
//   - Register checks the API version and that the resource is an extended
//     resource name, dials the plugin's endpoint (blocking, 10 s), calls
//     GetDevicePluginOptions and only then answers, while ListAndWatch
//     runs in the background;
//   - a restart stops serving without removing kubelet.sock (a kubelet
//     that dies leaves it behind), then starts again as above.
//
// Its checks are written independently of package deviceplugin so that the
// plugin cannot pass them by sharing a mistake.
package kubelettest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// dialTimeout is the kubelet's bound on dialling a plugin during Register.
const dialTimeout = 10 * time.Second

// Kubelet is a running fake kubelet device manager.
type Kubelet struct {
	dir    string
	socket string

	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every change
	srv           *grpc.Server
	startedAt     time.Time
	endpoints     map[string]*endpoint
	registrations map[string]int
	rejected      []error
}

// endpoint is a registered plugin, as the device manager keeps it.
type endpoint struct {
	socket  string
	conn    *grpc.ClientConn
	client  pluginapi.DevicePluginClient
	options *pluginapi.DevicePluginOptions
	stream  context.Context // ends the ListAndWatch call when cancelled
	cancel  context.CancelFunc
	history [][]*pluginapi.Device // every ListAndWatch message
}

// Start starts a kubelet on dir, creating it if needed.
func Start(dir string) (*Kubelet, error) {
	k := &Kubelet{
		dir:           dir,
		socket:        filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket)),
		changed:       make(chan struct{}),
		registrations: map[string]int{},
	}
	if err := k.start(); err != nil {
		return nil, err
	}
	return k, nil
}

// start does what the kubelet does when its process starts.
func (k *Kubelet) start() error {
	if err := os.MkdirAll(k.dir, 0o750); err != nil {
		return fmt.Errorf("create device plugin directory: %w", err)
	}
	if err := cleanupPluginDirectory(k.dir); err != nil {
		return err
	}
	return k.listen()
}

// listen serves the Registration service on a new kubelet.sock.
func (k *Kubelet) listen() error {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: k.socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen on %s: %w", k.socket, err)
	}
	l.SetUnlinkOnClose(false)
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, &registration{k: k})
	k.mu.Lock()
	k.srv = srv
	k.startedAt = time.Now()
	k.endpoints = map[string]*endpoint{}
	k.notifyLocked()
	k.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
	return nil
}

// cleanupPluginDirectory removes every file (not directory) in dir, as the
// device manager does on start (it spares only its checkpoint, which this
// kubelet does not write).
func cleanupPluginDirectory(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read device plugin directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Stop stops serving kubelet.sock and drops every plugin connection, as a
// kubelet process that exits; kubelet.sock stays behind.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	srv, eps := k.srv, k.endpoints
	k.srv, k.endpoints = nil, map[string]*endpoint{}
	k.notifyLocked()
	k.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
	for _, ep := range eps {
		ep.close()
	}
}

// Restart stops the kubelet and starts it again: every socket in the
// directory is deleted and kubelet.sock created anew. It returns when the
// new kubelet.sock accepts connections.
func (k *Kubelet) Restart() error {
	k.Stop()
	return k.start()
}

// Reopen stops serving and creates kubelet.sock anew without cleaning the
// directory, so a plugin sees only kubelet.sock re-created (and its
// connections dropped): the other signal of a kubelet restart.
func (k *Kubelet) Reopen() error {
	k.Stop()
	if err := os.Remove(k.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", k.socket, err)
	}
	return k.listen()
}

// StartedAt is when the current kubelet.sock began accepting connections.
func (k *Kubelet) StartedAt() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.startedAt
}

// Registrations counts the successful registrations of resource since the
// kubelet was created, across restarts.
func (k *Kubelet) Registrations(resource string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.registrations[resource]
}

// Rejected returns the errors Register has answered with.
func (k *Kubelet) Rejected() []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.rejected)
}

// Options returns the options the registered plugin reported, or nil.
func (k *Kubelet) Options(resource string) *pluginapi.DevicePluginOptions {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ep := k.endpoints[resource]; ep != nil {
		return ep.options
	}
	return nil
}

// Devices returns the last device list the plugin sent, ID to health, or
// nil when there is none.
func (k *Kubelet) Devices(resource string) map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	ep := k.endpoints[resource]
	if ep == nil || len(ep.history) == 0 {
		return nil
	}
	return healthMap(ep.history[len(ep.history)-1])
}

// Topology returns the NUMA nodes the plugin last reported for a device.
func (k *Kubelet) Topology(resource, id string) []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	ep := k.endpoints[resource]
	if ep == nil || len(ep.history) == 0 {
		return nil
	}
	var nodes []int64
	for _, d := range ep.history[len(ep.history)-1] {
		if d.ID == id && d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				nodes = append(nodes, n.ID)
			}
		}
	}
	return nodes
}

// History returns every device list the current registration of resource
// has received, oldest first.
func (k *Kubelet) History(resource string) []map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	ep := k.endpoints[resource]
	if ep == nil {
		return nil
	}
	out := make([]map[string]string, len(ep.history))
	for i, h := range ep.history {
		out[i] = healthMap(h)
	}
	return out
}

// WaitFor waits until cond, evaluated after every change the kubelet sees,
// holds.
func (k *Kubelet) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		k.mu.Lock()
		ch := k.changed
		k.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for kubelet state: %w", context.Cause(ctx))
		}
	}
}

// WaitRegistered waits until resource has registered at least n times in
// all and its current registration has received a device list.
func (k *Kubelet) WaitRegistered(ctx context.Context, resource string, n int) error {
	return k.WaitFor(ctx, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		ep := k.endpoints[resource]
		return k.registrations[resource] >= n && ep != nil && len(ep.history) > 0
	})
}

// WaitHealth waits until the last device list shows device id with the
// given health (pluginapi.Healthy or pluginapi.Unhealthy).
func (k *Kubelet) WaitHealth(ctx context.Context, resource, id, health string) error {
	return k.WaitFor(ctx, func() bool { return k.Devices(resource)[id] == health })
}

// Client returns the device plugin client of the current registration.
func (k *Kubelet) Client(resource string) (pluginapi.DevicePluginClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	ep := k.endpoints[resource]
	if ep == nil {
		return nil, fmt.Errorf("resource %s is not registered", resource)
	}
	return ep.client, nil
}

// Allocate asks the plugin for one container's devices, as the device
// manager does when it admits a Pod.
func (k *Kubelet) Allocate(ctx context.Context, resource string, ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	c, err := k.Client(resource)
	if err != nil {
		return nil, err
	}
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("allocate: %d container responses for 1 request", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0], nil
}

// GetPreferredAllocation asks which devices the plugin would pick; the
// device manager asks only plugins that said they answer.
func (k *Kubelet) GetPreferredAllocation(ctx context.Context, resource string, available, mustInclude []string, size int) ([]string, error) {
	if o := k.Options(resource); o == nil || !o.GetPreferredAllocationAvailable {
		return nil, fmt.Errorf("resource %s does not offer GetPreferredAllocation", resource)
	}
	c, err := k.Client(resource)
	if err != nil {
		return nil, err
	}
	resp, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size),
		}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("preferred allocation: %d container responses for 1 request", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// PreStartContainer calls the plugin before a container starts, with the
// kubelet's 30 s limit; only for plugins that asked for it.
func (k *Kubelet) PreStartContainer(ctx context.Context, resource string, ids ...string) error {
	if o := k.Options(resource); o == nil || !o.PreStartRequired {
		return fmt.Errorf("resource %s does not require PreStartContainer", resource)
	}
	c, err := k.Client(resource)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second)
	defer cancel()
	_, err = c.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids})
	return err
}

func (k *Kubelet) notifyLocked() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// registration serves the Registration service.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	k *Kubelet
}

// Register follows the device manager's server.Register.
func (r *registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k := r.k
	reject := func(err error) (*pluginapi.Empty, error) {
		k.mu.Lock()
		k.rejected = append(k.rejected, err)
		k.notifyLocked()
		k.mu.Unlock()
		return &pluginapi.Empty{}, err
	}
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		return reject(fmt.Errorf("requested device plugin API version %q is not supported by kubelet; supported versions are %v", req.Version, pluginapi.SupportedVersions))
	}
	if !isExtendedResourceName(req.ResourceName) {
		return reject(fmt.Errorf("resource name %q is invalid", req.ResourceName))
	}
	if req.Endpoint == "" || strings.Contains(req.Endpoint, "/") {
		return reject(fmt.Errorf("endpoint %q is not a file name in the device plugin directory", req.Endpoint))
	}
	ep, err := k.connect(ctx, filepath.Join(k.dir, req.Endpoint))
	if err != nil {
		return reject(err)
	}
	k.mu.Lock()
	if k.srv == nil { // stopped meanwhile
		k.mu.Unlock()
		ep.close()
		return reject(errors.New("kubelet is stopping"))
	}
	old := k.endpoints[req.ResourceName]
	k.endpoints[req.ResourceName] = ep
	k.registrations[req.ResourceName]++
	k.notifyLocked()
	k.mu.Unlock()
	if old != nil {
		old.close()
	}
	go k.listAndWatch(ep)
	return &pluginapi.Empty{}, nil
}

// connect dials the plugin, blocking until connected, and asks for its
// options (client.Connect and ManagerImpl.PluginConnected).
func (k *Kubelet) connect(ctx context.Context, socket string) (*endpoint, error) {
	dialCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithAuthority("localhost"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial device plugin %s: %w", socket, err)
	}
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(dialCtx, s) {
			_ = conn.Close()
			return nil, fmt.Errorf("dial device plugin %s: %w", socket, dialCtx.Err())
		}
	}
	client := pluginapi.NewDevicePluginClient(conn)
	options, err := client.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{})
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("get device plugin options from %s: %w", socket, err)
	}
	stream, cancelStream := context.WithCancel(context.Background())
	return &endpoint{socket: socket, conn: conn, client: client, options: options, stream: stream, cancel: cancelStream}, nil
}

// listAndWatch reads the plugin's device lists until the stream ends
// (client.Run).
func (k *Kubelet) listAndWatch(ep *endpoint) {
	stream, err := ep.client.ListAndWatch(ep.stream, &pluginapi.Empty{})
	if err != nil {
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		k.mu.Lock()
		ep.history = append(ep.history, resp.Devices)
		k.notifyLocked()
		k.mu.Unlock()
	}
}

func (ep *endpoint) close() {
	ep.cancel()
	_ = ep.conn.Close()
}

func healthMap(devs []*pluginapi.Device) map[string]string {
	m := make(map[string]string, len(devs))
	for _, d := range devs {
		m[d.ID] = d.Health
	}
	return m
}

var (
	qualifiedName = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	dnsSubdomain  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// isExtendedResourceName follows v1helper.IsExtendedResourceName: not a
// native resource (no domain, or kubernetes.io), not "requests."-prefixed,
// and a qualified name once prefixed with "requests.".
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") || strings.HasPrefix(name, "requests.") {
		return false
	}
	prefix, n, _ := strings.Cut("requests."+name, "/")
	return len(prefix) <= 253 && dnsSubdomain.MatchString(prefix) &&
		len(n) <= 63 && qualifiedName.MatchString(n) && !strings.Contains(n, "/")
}
