package csi

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bindery-dev/bindery/internal/roottest"
)

// setupDriver is a driver whose API server answers every binding of
// namespace shop with the password "pw-" and its name, as Bindery's
// credentials subresource answers (a test server: the code under test is
// the driver's handling of what the kubelet asks).
func setupDriver(t *testing.T) *Driver {
	t.Helper()
	return setupDriverWith(t, http.HandlerFunc(answerCredentials))
}

// answerCredentials answers a binding's credentials subresource with the
// password "pw-" and the binding's name.
func answerCredentials(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.URL.Path, "/")
	name := parts[len(parts)-2]
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "ServiceBindingCredentials",
		"metadata": map[string]any{"name": name}, "data": map[string][]byte{"password": []byte("pw-" + name)}})
}

// setupDriverWith is setupDriver with api as the API server.
func setupDriverWith(t *testing.T, api http.Handler) *Driver {
	t.Helper()
	roottest.Require(t, "the CSI driver (it mounts a tmpfs per volume)")
	srv := httptest.NewTLSServer(api)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{NodeID: "n", APIServer: srv.URL, APIServerCA: ca, PluginDir: t.TempDir(), RegistrationDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func unpublishAll(t *testing.T, d *Driver, targets ...string) {
	t.Cleanup(func() {
		for _, target := range targets {
			_, _ = d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target})
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})
}

// TestPublishBadTarget: a target path that is no clean absolute path, or
// holds a NUL, is bad input (InvalidArgument), not the driver's failure.
func TestPublishBadTarget(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	dir := t.TempDir()
	for _, target := range []string{dir + "/mo\x00unt", dir + "/a/../mount", dir + "//mount", dir + "/mount/"} {
		req := goodRequest()
		req.TargetPath = target
		unpublishAll(t, d, filepath.Clean(target))
		_, err := d.NodePublishVolume(t.Context(), req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("target %q: %v, want InvalidArgument", target, err)
		}
	}
	if _, err := d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: dir + "/mo\x00unt"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unpublish of a target with a NUL: %v, want InvalidArgument", err)
	}
}

// TestPublishSymlinkTarget: a target path that is a symlink is refused:
// mounting there would put the credentials wherever it points, and
// unpublish, removing the link, would leave them mounted there.
func TestPublishSymlinkTarget(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(dir, "mount")
	if err := os.Symlink(elsewhere, target); err != nil {
		t.Fatal(err)
	}
	unpublishAll(t, d, target, elsewhere)
	req := goodRequest()
	req.TargetPath = target
	_, err := d.NodePublishVolume(t.Context(), req)
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("publish at a symlink: %v, want FailedPrecondition", err)
	}
	if _, err := d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target}); err != nil {
		t.Errorf("unpublish: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(elsewhere, "password")); err == nil {
		t.Errorf("the credentials (%q) are mounted where the symlink pointed", b)
	}
}

// publishedRequest publishes goodRequest at a new target path, unpublished
// when the test ends, and returns the request.
func publishedRequest(t *testing.T, d *Driver) *csipb.NodePublishVolumeRequest {
	t.Helper()
	req := goodRequest()
	req.TargetPath = filepath.Join(t.TempDir(), "mount")
	unpublishAll(t, d, req.TargetPath)
	if _, err := d.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return req
}

// TestPublishOtherBinding: a target path published for one binding is not
// published again for another (AlreadyExists, as the CSI spec says for a
// volume published with incompatible parameters); its files stay the
// first binding's.
func TestPublishOtherBinding(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	req := publishedRequest(t, d)
	target := req.TargetPath
	req.VolumeContext[AttributeBinding] = "payments"
	if _, err := d.NodePublishVolume(t.Context(), req); status.Code(err) != codes.AlreadyExists {
		t.Errorf("publish of another binding at the same target: %v, want AlreadyExists", err)
	}
	if b, _ := os.ReadFile(filepath.Join(target, "password")); string(b) != "pw-orders" {
		t.Errorf("the volume holds %q", b)
	}
	req.VolumeContext[AttributeBinding] = "orders"
	if _, err := d.NodePublishVolume(t.Context(), req); err != nil {
		t.Errorf("republish of the same binding: %v", err)
	}
}

// TestNoSecretsLogged: publishing, refreshing, refusing and unpublishing
// log neither the Pod's token nor a credential's value.
func TestNoSecretsLogged(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	var logs strings.Builder
	var mu sync.Mutex
	d.log = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	req := publishedRequest(t, d)
	target := req.TargetPath
	v, _, _ := d.volume(&publish{target: target, volumeID: req.VolumeId, binding: "orders", pod: podInfo{uid: "u"}})
	d.refresh(t.Context(), v)
	bad := goodRequest()
	bad.TargetPath = filepath.Join(t.TempDir(), "other")
	bad.Secrets[keyTokens] = "s3cr3t-t0ken"
	_, _ = d.NodePublishVolume(t.Context(), bad)
	if _, err := d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, secret := range []string{"s3cr3t-t0ken", "pw-orders"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("%s is logged:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "credentials written") {
		t.Errorf("nothing logged of the write:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestPublishGroup: the driver asks for the Pod's fsGroup
// (VOLUME_MOUNT_GROUP); with one, no credential file nor the volume's
// root is readable by others than root and that group; a group that is
// no number is refused.
func TestPublishGroup(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	caps, err := d.NodeGetCapabilities(t.Context(), &csipb.NodeGetCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 1 || caps.GetCapabilities()[0].GetRpc().GetType() != csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP {
		t.Errorf("node capabilities %v, %v; want VOLUME_MOUNT_GROUP", caps, err)
	}
	target := filepath.Join(t.TempDir(), "mount")
	unpublishAll(t, d, target)
	req := goodRequest()
	req.TargetPath = target
	req.VolumeCapability.GetMount().VolumeMountGroup = "4321"
	if _, err := d.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	data, err := filepath.EvalSymlinks(filepath.Join(target, dataLink))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{target, data, filepath.Join(data, "password")} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o007 != 0 || st.Uid != 0 || st.Gid != 4321 || st.Mode&0o040 == 0 {
			t.Errorf("%s: mode %o, owner %d:%d; want no access for others, root:4321, group-readable", p, st.Mode&0o777, st.Uid, st.Gid)
		}
	}
	bad := goodRequest()
	bad.TargetPath = filepath.Join(t.TempDir(), "mount")
	bad.VolumeCapability.GetMount().VolumeMountGroup = "staff"
	unpublishAll(t, d, bad.TargetPath)
	if _, err := d.NodePublishVolume(t.Context(), bad); status.Code(err) != codes.InvalidArgument {
		t.Errorf("group %q: %v, want InvalidArgument", "staff", err)
	}
}

// TestVolumeBounds: the driver publishes at most MaxVolumesPerPod volumes
// for one Pod, MaxVolumesPerNamespace for one namespace's Pods and
// MaxVolumes on the node (RESOURCE_EXHAUSTED beyond, naming which), so
// another namespace is served beside one at its bound, counts a volume out when it is unpublished, still
// answers a republish of a volume it holds at its bound, and tells the
// kubelet its bound.
func TestVolumeBounds(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	d.opts.MaxVolumes, d.opts.MaxVolumesPerNamespace, d.opts.MaxVolumesPerPod = 4, 3, 2
	publish := func(namespace, pod, volume string) (*csipb.NodePublishVolumeRequest, error) {
		req := goodRequest()
		req.VolumeId, req.VolumeContext[keyPodNamespace], req.VolumeContext[keyPodUID] = volume, namespace, pod
		req.TargetPath = filepath.Join(t.TempDir(), "mount")
		unpublishAll(t, d, req.TargetPath)
		_, err := d.NodePublishVolume(t.Context(), req)
		return req, err
	}
	exhausted := func(err error, bound, what string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), bound) {
			t.Errorf("%s: %v, want ResourceExhausted naming %q", what, err, bound)
		}
	}
	first, err := publish("shop", "u1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := publish("shop", "u1", "b"); err != nil {
		t.Fatal(err)
	}
	_, err = publish("shop", "u1", "c")
	exhausted(err, "the most one Pod may have", "a third volume of one Pod")
	if _, err := publish("shop", "u2", "d"); err != nil {
		t.Fatal(err)
	}
	_, err = publish("shop", "u3", "e")
	exhausted(err, "the most one namespace may have", "a fourth volume of one namespace")
	if _, err := publish("other", "u4", "f"); err != nil {
		t.Errorf("another namespace's volume beside a namespace at its bound: %v", err)
	}
	_, err = publish("other", "u5", "g")
	exhausted(err, "the most it serves", "a fifth volume on the node")
	if _, err := d.NodePublishVolume(t.Context(), first); err != nil {
		t.Errorf("a republish at the bound: %v", err)
	}
	if _, err := d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: "a", TargetPath: first.TargetPath}); err != nil {
		t.Fatal(err)
	}
	if _, err := publish("shop", "u3", "e"); err != nil {
		t.Errorf("a volume once another was unpublished: %v", err)
	}
	if info, _ := d.NodeGetInfo(t.Context(), nil); info.GetMaxVolumesPerNode() != 4 {
		t.Errorf("max_volumes_per_node %d, want 4", info.GetMaxVolumesPerNode())
	}
}

// TestNamespaceBoundFollowsNode: unless given, one namespace's bound is a
// quarter of the node's, whatever the node's is, and at least one.
func TestNamespaceBoundFollowsNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ node, namespace, want int }{
		{0, 0, DefaultMaxVolumes / 4},
		{2000, 0, 500},
		{100, 0, 25},
		{2, 0, 1},
		{2000, 7, 7},
	} {
		d, err := New(Options{NodeID: "n", APIServer: "https://127.0.0.1:1", PluginDir: t.TempDir(), RegistrationDir: t.TempDir(),
			MaxVolumes: tc.node, MaxVolumesPerNamespace: tc.namespace})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.opts.MaxVolumesPerNamespace; got != tc.want {
			t.Errorf("node %d, namespace %d: a namespace's bound %d, want %d", tc.node, tc.namespace, got, tc.want)
		}
	}
}

// TestFailedRepublishKeepsVolume: a republish that fails (here the target
// was unmounted and replaced by a file behind the driver's back) leaves
// the volume published, as the CSI spec has it until the kubelet
// unpublishes it: it still counts toward the bounds, and unpublishing it
// frees its place.
func TestFailedRepublishKeepsVolume(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	d.opts.MaxVolumesPerNamespace = 1
	req := publishedRequest(t, d)
	if err := unix.Unmount(req.TargetPath, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(req.TargetPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(req.TargetPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodePublishVolume(t.Context(), req); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("republish onto a file: %v, want FailedPrecondition", err)
	}
	other := otherPodRequest(t, d)
	if _, err := d.NodePublishVolume(t.Context(), other); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a second volume of the namespace while the first is published: %v, want ResourceExhausted", err)
	}
	if _, err := d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: req.TargetPath}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodePublishVolume(t.Context(), other); err != nil {
		t.Errorf("a second volume of the namespace once the first is unpublished: %v", err)
	}
}

// TestRestartedDriverKeepsMountedVolume: after a restart, the kubelet's
// republish of a volume still mounted counts it toward the bounds even
// when its credentials cannot be read (the API server is down): the
// volume is published, and its files stay.
func TestRestartedDriverKeepsMountedVolume(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	req := publishedRequest(t, d)
	restarted, err := New(Options{NodeID: "n", APIServer: "https://127.0.0.1:1", PluginDir: t.TempDir(), RegistrationDir: t.TempDir(), MaxVolumesPerNamespace: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.NodePublishVolume(t.Context(), req); err == nil {
		t.Fatal("a republish with the API server down succeeded")
	}
	if b, err := os.ReadFile(filepath.Join(req.TargetPath, "password")); err != nil || string(b) != "pw-orders" {
		t.Errorf("the files after a failed republish: %q, %v", b, err)
	}
	other := otherPodRequest(t, restarted)
	if _, err := restarted.NodePublishVolume(t.Context(), other); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a second volume of the namespace beside the mounted one: %v, want ResourceExhausted", err)
	}
}

// otherPodRequest is goodRequest for another Pod of the same namespace,
// at a new target path unpublished when the test ends.
func otherPodRequest(t *testing.T, d *Driver) *csipb.NodePublishVolumeRequest {
	req := goodRequest()
	req.VolumeId, req.VolumeContext[keyPodUID] = "other", "u-other"
	req.TargetPath = filepath.Join(t.TempDir(), "mount")
	unpublishAll(t, d, req.TargetPath)
	return req
}

// TestRefreshBacksOff: a volume whose refreshes fail (the API server
// answers 503) waits twice as long after each failure, and a random share
// more, instead of asking again every interval; the kubelet's republish
// that reads them ends the wait.
func TestRefreshBacksOff(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	var asked atomic.Int64
	d := setupDriverWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			asked.Add(1)
			http.Error(w, `{"kind":"Status","code":503}`, http.StatusServiceUnavailable)
			return
		}
		answerCredentials(w, r)
	}))
	d.opts.RefreshInterval = 10 * time.Millisecond
	req := publishedRequest(t, d)
	down.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	d.refreshLoop(ctx)
	// Every 10 ms, a second is 100 reads; doubling from 10 ms, at most 7.
	if n := asked.Load(); n < 2 || n > 10 {
		t.Errorf("%d reads of a failing API server in a second, refreshing every 10 ms; want the doubling waits' 2 to 10", n)
	}
	down.Store(false)
	d.mu.Lock()
	v := d.volumes[req.TargetPath]
	d.mu.Unlock()
	if _, err := d.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.retry != nil || !v.notBefore.IsZero() {
		t.Errorf("the kubelet's republish, which read the credentials, left the refreshes waiting: %+v until %v", v.retry, v.notBefore)
	}
}

// TestRefreshOfAnUnmountedVolume: a volume whose tmpfs was unmounted under
// the driver (the directory stays, on the node's disk) is not refreshed:
// no credential is written to the disk, and unpublishing it succeeds.
func TestRefreshOfAnUnmountedVolume(t *testing.T) {
	t.Parallel()
	d := setupDriver(t)
	req := publishedRequest(t, d)
	if err := unix.Unmount(req.TargetPath, 0); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	v := d.volumes[req.TargetPath]
	d.mu.Unlock()
	d.refresh(t.Context(), v)
	if entries, err := os.ReadDir(req.TargetPath); err != nil || len(entries) > 0 {
		t.Errorf("the refresh wrote %d entries on the node's disk (%v)", len(entries), err)
	}
	if _, err := d.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: req.TargetPath}); err != nil {
		t.Errorf("unpublish: %v", err)
	}
}
