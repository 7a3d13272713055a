package csi

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/bindery-dev/bindery/internal/version"
)

// The Identity and Node services, as the kubelet calls them for inline
// volumes (https://github.com/container-storage-interface/spec/blob/master/spec.md).

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: Name, VendorVersion: version.String()}, nil
}

// GetPluginCapabilities lists none: no controller service, as volumes
// are inline in Pods, and no topology, as every node serves every binding.
func (d *Driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{}, nil
}

// Probe says the driver is ready once it serves: it needs nothing else.
func (d *Driver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// NodeGetCapabilities lists VOLUME_MOUNT_GROUP only, so the kubelet
// passes the Pod's fsGroup and the driver makes the files that group's
// alone; no staging (a volume is published straight to its Pod), no
// stats, no expansion.
func (d *Driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{
		Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP}},
	}}}, nil
}

// NodeGetInfo names the node and the most volumes the driver publishes
// on it.
func (d *Driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: d.opts.NodeID, MaxVolumesPerNode: int64(d.opts.MaxVolumes)}, nil
}

// volume is one published volume: a tmpfs at target holding the
// credentials of a binding, read as the Pod's service account.
type volume struct {
	// mu serialises the publishes, refreshes and unpublish of the volume.
	mu      sync.Mutex
	id      string
	target  string
	pod     podInfo
	binding string // what the Pod's volume names
	group   int    // the Pod's fsGroup, or noGroup
	current string // whose credentials the files hold: binding or a rotation of it
	token   token
	gone    bool // unpublished: the map no longer holds it
	// retry is the wait after a refresh that failed, doubled at each
	// failure in a row (nil after a success); the next refresh waits
	// until notBefore.
	retry     *wait.Backoff
	notBefore time.Time
}

// NodePublishVolume mounts a tmpfs at the target path and writes the
// binding's credentials into it, or, when the kubelet calls again
// (requiresRepublish: about once a Pod sync, with a fresh token), writes
// them again if they changed. It is idempotent: the same request twice
// leaves one mount holding the same files.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	began := time.Now()
	p, err := parsePublish(req, d.opts.Audience)
	if err != nil {
		d.metrics.publishes.WithLabelValues("invalid").Inc()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, made, err := d.volume(p)
	if err != nil {
		d.metrics.publishes.WithLabelValues(result(err)).Inc()
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gone {
		return nil, status.Error(codes.Aborted, "the volume was unpublished meanwhile")
	}
	// A first publish that fails leaves nothing published. A volume
	// published before (a republish, or a mount kept from before the
	// driver started) stays published until the kubelet unpublishes it,
	// so it keeps its place in the bounds.
	failed := func(err error, mountedBefore bool) (*csipb.NodePublishVolumeResponse, error) {
		if made && !mountedBefore {
			d.forget(v)
		}
		d.metrics.publishes.WithLabelValues(result(err)).Inc()
		return nil, err
	}
	if _, err := os.Stat(filepath.Dir(p.target)); err != nil {
		return failed(status.Errorf(codes.NotFound, "the parent of target_path %s: %v", p.target, err), false)
	}
	fresh, err := d.ensureMounted(p.target, p.group)
	if err != nil {
		return failed(err, false)
	}
	v.token = p.token
	if v.current == "" {
		v.current = readState(p.target)
	}
	if v.current == "" {
		v.current = p.binding
	}
	if err := d.fill(ctx, v); err != nil {
		if fresh {
			// Nothing a Pod could have seen: the next attempt starts over.
			_ = unmountAndRemove(p.target)
		}
		d.log.Warn("publish volume", "volume", p.volumeID, "pod", p.pod.String(), "binding", p.binding, "err", err)
		return failed(err, !fresh)
	}
	d.metrics.publishes.WithLabelValues("ok").Inc()
	d.metrics.publishSeconds.Observe(time.Since(began).Seconds())
	return &csipb.NodePublishVolumeResponse{}, nil
}

// ensureMounted mounts the tmpfs unless it is there; fresh says it was not.
func (d *Driver) ensureMounted(target string, group int) (fresh bool, err error) {
	// mount(2) follows a symlink: the credentials would land wherever it
	// points, and unpublish, removing the link, would leave them there.
	if fi, err := os.Lstat(target); err == nil && !fi.IsDir() {
		return false, status.Errorf(codes.FailedPrecondition, "target_path %s: exists and is not a directory (%v)", target, fi.Mode().Type())
	}
	ok, err := mounted(target)
	switch {
	case err == nil && ok:
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, status.Errorf(codes.Internal, "inspect target_path %s: %v", target, err)
	}
	if err := mountTmpfs(target, group); err != nil {
		return false, status.Errorf(codes.Internal, "%s: %v", target, err)
	}
	return true, nil
}

// fill reads the newest credentials of the volume's binding and writes
// them. A rotation it cannot follow (the Pod may not read the successor)
// leaves the last readable credentials in place, and is logged.
func (d *Driver) fill(ctx context.Context, v *volume) error {
	ctx, cancel := context.WithTimeout(ctx, 2*fetchTimeout)
	defer cancel()
	fetched := time.Now()
	creds, err := d.client.latest(ctx, v.pod, v.current, v.token)
	d.metrics.fetchSeconds.Observe(time.Since(fetched).Seconds())
	if creds == nil {
		return err
	}
	if err != nil {
		d.log.Warn("a rotation of the binding is not readable; keeping the credentials of the last readable binding",
			"pod", v.pod.String(), "binding", creds.Name, "err", err)
	}
	// The tmpfs may have been unmounted under the driver: the directory
	// stays, on the node's disk, where no credential may go.
	if ok, err := mounted(v.target); err != nil || !ok {
		return status.Errorf(codes.FailedPrecondition, "%s is no longer the volume's tmpfs; the credentials are not written (%v)", v.target, err)
	}
	changed, werr := writeFiles(v.target, creds.Data, v.group)
	if werr != nil {
		return status.Errorf(codes.Internal, "write the credentials of ServiceBinding %s/%s: %v", v.pod.namespace, creds.Name, werr)
	}
	if err := writeState(v.target, creds.Name); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	if changed {
		d.metrics.writes.Inc()
		d.log.Info("credentials written", "pod", v.pod.String(), "binding", creds.Name, "keys", len(creds.Data), "resourceVersion", creds.ResourceVersion)
	}
	v.current = creds.Name
	v.retry, v.notBefore = nil, time.Time{} // a failed refresh's wait is over
	return nil
}

// NodeUnpublishVolume unmounts the tmpfs, so the credentials are gone
// from the node, and removes the target path. Unpublishing what is not
// there succeeds.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id: required")
	}
	if err := checkTarget(req.GetTargetPath()); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	target := req.GetTargetPath()
	d.mu.Lock()
	v := d.volumes[target]
	d.mu.Unlock()
	if v != nil {
		v.mu.Lock()
		defer v.mu.Unlock()
	}
	if err := unmountAndRemove(target); err != nil {
		d.metrics.unpublishes.WithLabelValues("error").Inc()
		return nil, status.Errorf(codes.Internal, "%s: %v", target, err)
	}
	if v != nil {
		d.forget(v)
	}
	d.metrics.unpublishes.WithLabelValues("ok").Inc()
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// volume returns the record of the request's target path, making one
// (made) unless the path is published already. A
// target path published for another binding, volume or Pod is not taken
// over: the CSI spec's ALREADY_EXISTS for a volume published at the
// target with incompatible parameters
// (https://github.com/container-storage-interface/spec/blob/master/spec.md#nodepublishvolume-errors).
func (d *Driver) volume(p *publish) (v *volume, made bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v = d.volumes[p.target]; v != nil {
		if v.binding != p.binding || v.id != p.volumeID || v.pod.uid != p.pod.uid {
			return nil, false, status.Errorf(codes.AlreadyExists, "target_path %s: published already for volume %s (binding %q of Pod %s); unpublish it first",
				p.target, v.id, v.binding, v.pod.String())
		}
		return v, false, nil
	}
	switch {
	case len(d.volumes) >= d.opts.MaxVolumes:
		return nil, false, status.Errorf(codes.ResourceExhausted, "the node has %d volumes of %s published, the most it serves (--csi-max-volumes)", len(d.volumes), Name)
	case d.perNS[p.pod.namespace] >= d.opts.MaxVolumesPerNamespace:
		return nil, false, status.Errorf(codes.ResourceExhausted, "namespace %s has %d volumes of %s published on the node, the most one namespace may have (--csi-max-volumes-per-namespace)",
			p.pod.namespace, d.perNS[p.pod.namespace], Name)
	case d.perPod[p.pod.uid] >= d.opts.MaxVolumesPerPod:
		return nil, false, status.Errorf(codes.ResourceExhausted, "Pod %s has %d volumes of %s published, the most one Pod may have (--csi-max-volumes-per-pod)",
			p.pod.String(), d.perPod[p.pod.uid], Name)
	}
	v = &volume{id: p.volumeID, target: p.target, pod: p.pod, binding: p.binding, group: p.group}
	d.volumes[p.target] = v
	d.perPod[p.pod.uid]++
	d.perNS[p.pod.namespace]++
	d.metrics.volumes.Set(float64(len(d.volumes)))
	return v, true, nil
}

// forget drops a volume's record; the caller holds v.mu.
func (d *Driver) forget(v *volume) {
	v.gone = true
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.volumes[v.target] == v {
		delete(d.volumes, v.target)
		countOut(d.perPod, v.pod.uid)
		countOut(d.perNS, v.pod.namespace)
	}
	d.metrics.volumes.Set(float64(len(d.volumes)))
}

// countOut takes one from a party's count, dropping the party at none.
func countOut(counts map[string]int, party string) {
	if counts[party]--; counts[party] <= 0 {
		delete(counts, party)
	}
}

// refreshLoop reads every volume's credentials again each
// RefreshInterval, so a rotation reaches the files within it even when
// the kubelet republishes less often (its Pod sync, a minute by default).
// It uses the token the kubelet last gave for the volume, while it is
// valid for another margin; a volume whose token is older waits for the
// kubelet.
func (d *Driver) refreshLoop(ctx context.Context) {
	tick := time.NewTicker(d.opts.RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d.mu.Lock()
		vols := make([]*volume, 0, len(d.volumes))
		for _, v := range d.volumes {
			vols = append(vols, v)
		}
		d.mu.Unlock()
		for _, v := range vols {
			d.refresh(ctx, v)
		}
	}
}

// tokenMargin is how long a token must still be valid to be used.
const tokenMargin = 30 * time.Second

// refreshLimit is the longest a volume whose refreshes keep failing
// waits between two.
const refreshLimit = 5 * time.Minute

func (d *Driver) refresh(ctx context.Context, v *volume) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	if v.gone || now.Before(v.notBefore) || (!v.token.expires.IsZero() && v.token.expires.Sub(now) < tokenMargin) {
		return
	}
	if err := d.fill(ctx, v); err != nil {
		// An API server that is down is not asked again by every volume
		// of every node each interval, nor by all at once when it is back:
		// the volume waits twice as long after each failure, and a random
		// share more (the kubelet's republish is not held back).
		if v.retry == nil {
			v.retry = &wait.Backoff{Duration: d.opts.RefreshInterval, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: refreshLimit}
		}
		v.notBefore = now.Add(v.retry.Step())
		d.metrics.refreshes.WithLabelValues(result(err)).Inc()
		d.log.Warn("refresh volume", "volume", v.id, "pod", v.pod.String(), "binding", v.current, "next", v.notBefore, "err", err)
		return
	}
	d.metrics.refreshes.WithLabelValues("ok").Inc()
}

// result is a metric label for an error: its gRPC code.
func result(err error) string {
	return status.Code(err).String()
}
