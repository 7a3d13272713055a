package deviceplugin

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The DevicePlugin service, as the kubelet's device manager calls it
// (https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/).

// GetDevicePluginOptions tells the kubelet which optional calls to make:
// GetPreferredAllocation always, PreStartContainer when configured.
func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.options, nil
}

// ListAndWatch sends the device list, then the whole list again after
// every change of a device's presence or health, until the kubelet hangs
// up or the server stops.
func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	sub := p.state.subscribe()
	defer p.state.unsubscribe(sub)
	for {
		for _, snap := range sub.take() {
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: snap.list}); err != nil {
				return fmt.Errorf("send device list: %w", err)
			}
		}
		select {
		case <-sub.wake:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// GetPreferredAllocation answers for each container with the devices the
// plugin would pick (see preferred).
func (p *plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	snap := p.state.current()
	resp := &pluginapi.PreferredAllocationResponse{
		ContainerResponses: make([]*pluginapi.ContainerPreferredAllocationResponse, 0, len(req.ContainerRequests)),
	}
	for _, cr := range req.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{
			DeviceIDs: preferred(snap, cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize)),
		})
	}
	return resp, nil
}

// Allocate tells the runtime, for each container, which device nodes to
// create and which mounts, environment, annotations and CDI devices to
// add. It refuses the whole request when any ID is unknown or unhealthy,
// so the kubelet fails the Pod instead of starting it without its device.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	snap := p.state.current()
	resp := &pluginapi.AllocateResponse{
		ContainerResponses: make([]*pluginapi.ContainerAllocateResponse, 0, len(req.ContainerRequests)),
	}
	for i, cr := range req.ContainerRequests {
		if err := checkIDs(snap, cr.DevicesIds); err != nil {
			p.rejected.Inc()
			return nil, status.Errorf(status.Code(err), "allocate %s for container request %d: %s", p.resource, i, status.Convert(err).Message())
		}
		resp.ContainerResponses = append(resp.ContainerResponses, p.containerResponse(snap, cr.DevicesIds))
	}
	p.allocated.Add(float64(len(req.ContainerRequests)))
	return resp, nil
}

// PreStartContainer runs the configured command with the host paths of
// the container's devices.
func (p *plugin) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	ps := p.cfg.PreStartContainer
	if ps == nil {
		return &pluginapi.PreStartContainerResponse{}, nil
	}
	snap := p.state.current()
	if err := checkIDs(snap, req.DevicesIds); err != nil {
		return nil, err
	}
	var paths []string
	seen := map[string]bool{}
	for _, id := range req.DevicesIds {
		for _, h := range snap.byID[id].hostPaths {
			if !seen[h] {
				seen[h] = true
				paths = append(paths, h)
			}
		}
	}
	timeout := time.Duration(ps.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = defaultPreStartTimeout * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, ps.Command[0], append(ps.Command[1:len(ps.Command):len(ps.Command)], paths...)...)
	cmd.Env = append(os.Environ(), "BINDERY_RESOURCE_NAME="+p.resource, "BINDERY_DEVICE_IDS="+strings.Join(req.DevicesIds, ","))
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.log.Warn("pre-start command failed", "devices", req.DevicesIds, "err", err, "output", truncate(out, 512))
		return nil, status.Errorf(codes.Internal, "pre-start %s for %v: %v: %s", ps.Command[0], req.DevicesIds, err, truncate(out, 512))
	}
	p.log.Debug("pre-start command succeeded", "devices", req.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

// checkIDs returns a gRPC status error unless every ID is a known,
// healthy device.
func checkIDs(snap *snapshot, ids []string) error {
	if len(ids) == 0 {
		return status.Error(codes.InvalidArgument, "no device IDs")
	}
	for _, id := range ids {
		e := snap.byID[id]
		if e == nil {
			return status.Errorf(codes.InvalidArgument, "unknown device %q", id)
		}
		if !e.healthy {
			return status.Errorf(codes.FailedPrecondition, "device %q is unhealthy", id)
		}
	}
	return nil
}

// containerResponse builds one container's allocation from checked IDs.
func (p *plugin) containerResponse(snap *snapshot, ids []string) *pluginapi.ContainerAllocateResponse {
	// Clipped: appending a device's mounts must not write into p.mounts.
	r := &pluginapi.ContainerAllocateResponse{Mounts: slices.Clip(p.mounts)}
	var seen map[string]bool
	if p.cfg.Slots > 0 && len(ids) > 1 {
		seen = map[string]bool{} // slots share their nodes
	}
	first := func(containerPath string) bool {
		if seen == nil {
			return true
		}
		if seen[containerPath] {
			return false
		}
		seen[containerPath] = true
		return true
	}
	for _, id := range ids {
		e := snap.byID[id]
		for _, s := range e.specs {
			if first(s.ContainerPath) {
				r.Devices = append(r.Devices, s)
			}
		}
		for _, m := range e.mounts {
			if first(m.ContainerPath) {
				r.Mounts = append(r.Mounts, m)
			}
		}
	}
	if len(p.cfg.Env) > 0 || p.cfg.DeviceIDsEnv != "" {
		r.Envs = make(map[string]string, len(p.cfg.Env)+1)
		maps.Copy(r.Envs, p.cfg.Env)
		if p.cfg.DeviceIDsEnv != "" {
			r.Envs[p.cfg.DeviceIDsEnv] = strings.Join(ids, ",")
		}
	}
	if len(p.cfg.Annotations) > 0 {
		r.Annotations = maps.Clone(p.cfg.Annotations)
	}
	for _, name := range p.cfg.CDIDevices {
		if !strings.Contains(name, "{id}") {
			r.CdiDevices = append(r.CdiDevices, &pluginapi.CDIDevice{Name: name})
			continue
		}
		for _, id := range ids {
			r.CdiDevices = append(r.CdiDevices, &pluginapi.CDIDevice{Name: strings.ReplaceAll(name, "{id}", id)})
		}
	}
	return r
}

func truncate(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
