package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindery-dev/bindery/internal/kubetest"
	"github.com/bindery-dev/bindery/internal/roottest"
	"github.com/bindery-dev/bindery/nodeagent/csi"
)

// sanitySkips are the csi-test sanity specs that need a controller
// service (CreateVolume, ControllerPublishVolume, snapshots): an
// ephemeral-only driver has none, so they do not apply. Each is named.
var sanitySkips = []string{
	`\[Controller Server\]`,      // every spec of the controller service
	`\[GroupController Server\]`, // group snapshots
	`\[GroupController VolumeGroupSnapshots\]`,
	`Node Service should work`,                            // CreateVolume, then publish
	`Node Service should be idempotent`,                   // idem, repeated
	`NodeUnpublishVolume should remove target path`,       // CreateVolume first
	`with single node multi writer capability`,            // CreateVolume first
	`NodeGetVolumeStats should fail when volume does not`, // CreateVolume first (and no stats)
}

// csiBundle is the stack with the driver serving a kubelet directory of
// its own (no kubelet: the sanity suite and the tests below call it as
// the kubelet would), a binding "orders" in namespace shop, and service
// accounts web (granted) and nosy (not).
type csiBundle struct {
	*csiStack
	driver     *proc
	kubeletDir string
	conn       *grpc.ClientConn
}

func setupCSI(t *testing.T) *csiBundle {
	t.Helper()
	roottest.Require(t, "the CSI driver (it mounts a tmpfs per volume)")
	cluster := kubetest.Start(t)
	_, target := targetPostgres(t, netip.MustParseAddr("127.0.0.1"))
	s := startCSIStack(t, cluster, "127.0.0.1", nil, "--target-database-url", target)
	s.namespace(t, "shop")
	s.bind(t, "shop", "orders", "")
	s.serviceAccount(t, "shop", "web", true)
	s.serviceAccount(t, "shop", "nosy", false)
	b := &csiBundle{csiStack: s, kubeletDir: t.TempDir()}
	b.driver = s.startDriver(t, b.kubeletDir, "sanity-node")
	conn, err := grpc.NewClient("unix://"+filepath.Join(b.kubeletDir, "plugins", csi.Name, "csi.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b.conn = conn
	return b
}

// publishRequest is what the kubelet sends for a Pod of service account
// sa whose inline volume names binding.
func (b *csiBundle) publishRequest(t *testing.T, sa, binding, target string) *csipb.NodePublishVolumeRequest {
	t.Helper()
	tokens, err := json.Marshal(map[string]any{csi.DefaultAudience: map[string]any{"token": b.token(t, "shop", sa), "expirationTimestamp": time.Now().Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	return &csipb.NodePublishVolumeRequest{
		VolumeId: "csi-" + filepath.Base(filepath.Dir(target)), TargetPath: target, Readonly: true,
		VolumeCapability: &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY}},
		VolumeContext: map[string]string{
			csi.AttributeBinding: binding, "csi.storage.k8s.io/pod.namespace": "shop", "csi.storage.k8s.io/pod.name": "app",
			"csi.storage.k8s.io/pod.uid": "uid-" + sa, "csi.storage.k8s.io/serviceAccount.name": sa, "csi.storage.k8s.io/ephemeral": "true",
		},
		Secrets: map[string]string{"csi.storage.k8s.io/serviceAccount.tokens": string(tokens)},
	}
}

// TestCSISanity runs csi-test's sanity suite against the driver's Identity
// and Node services (the controller specs skipped, as sanitySkips says),
// with a volume context naming a real binding, then Bindery's own cases.
func TestCSISanity(t *testing.T) {
	b := setupCSI(t)
	sock := filepath.Join(b.kubeletDir, "plugins", csi.Name, "csi.sock")

	t.Run("sanity", func(t *testing.T) {
		cfg := sanity.NewTestConfig()
		cfg.Address = "unix://" + sock
		cfg.TargetPath = filepath.Join(t.TempDir(), "target")
		cfg.StagingPath = filepath.Join(t.TempDir(), "staging")
		cfg.TestVolumeParameters = b.publishRequest(t, "web", "orders", cfg.TargetPath).VolumeContext
		sc := sanity.GinkgoTest(&cfg)
		gomega.RegisterFailHandler(ginkgo.Fail)
		suite, reporter := ginkgo.GinkgoConfiguration()
		suite.SkipStrings = sanitySkips
		reporter.Succinct = true
		ginkgo.RunSpecs(t, "csi.bindery.dev sanity", suite, reporter)
		sc.Finalize()
	})

	t.Run("publish", func(t *testing.T) { b.testPublish(t) })
	t.Run("refused", func(t *testing.T) { b.testRefused(t) })
}

// testPublish: the files are the binding's credentials in the
// servicebinding.io layout on a tmpfs; a second publish changes nothing
// and stacks no mount; unpublish takes the mount and the target path away,
// and a second unpublish succeeds.
func (b *csiBundle) testPublish(t *testing.T) {
	ctx := t.Context()
	node := csipb.NewNodeClient(b.conn)
	target := filepath.Join(t.TempDir(), "mount")
	req := b.publishRequest(t, "web", "orders", target)
	want, err := b.sc.ServicecatalogV1beta1().ServiceBindings("shop").GetCredentials(ctx, "orders", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := node.NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if n := mountsAt(t, target); n != 1 {
		t.Errorf("%d mounts at the target after three publishes, want 1", n)
	}
	for _, key := range []string{"type", "provider", "uri", "username", "password"} {
		got, err := os.ReadFile(filepath.Join(target, key))
		if err != nil || string(got) != string(want.Data[key]) || len(got) == 0 {
			t.Errorf("%s: %d bytes (%v), not the binding's %d", key, len(got), err, len(want.Data[key]))
		}
	}
	if got, _ := os.ReadFile(filepath.Join(target, "type")); string(got) != "postgresql" {
		t.Errorf("type %q", got)
	}
	for range 2 {
		if _, err := node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: req.VolumeId, TargetPath: target}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) || mountsAt(t, target) != 0 {
		t.Errorf("after unpublish the target is still there (%v) or mounted", err)
	}
}

// testRefused: what the driver refuses, and how it names the cause.
func (b *csiBundle) testRefused(t *testing.T) {
	ctx := t.Context()
	node := csipb.NewNodeClient(b.conn)
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		req    *csipb.NodePublishVolumeRequest
		code   codes.Code
		reason []string
	}{
		{"missing target path", func() *csipb.NodePublishVolumeRequest {
			r := b.publishRequest(t, "web", "orders", filepath.Join(dir, "a", "mount"))
			r.TargetPath = ""
			return r
		}(), codes.InvalidArgument, []string{"target_path: required"}},
		{"target path's parent missing", b.publishRequest(t, "web", "orders", filepath.Join(dir, "no", "such", "mount")), codes.NotFound, []string{"parent of target_path"}},
		{"bad volume context", func() *csipb.NodePublishVolumeRequest {
			r := b.publishRequest(t, "web", "orders", filepath.Join(dir, "mount-b"))
			delete(r.VolumeContext, csi.AttributeBinding)
			r.VolumeContext["bindingName"] = "orders"
			return r
		}(), codes.InvalidArgument, []string{"volume_context[binding]: required", "volume_context[bindingName]: unknown attribute"}},
		{"no such binding", b.publishRequest(t, "web", "nothing", filepath.Join(dir, "mount-n")), codes.NotFound, []string{"no ServiceBinding shop/nothing"}},
		{"service account without the grant", b.publishRequest(t, "nosy", "orders", filepath.Join(dir, "mount-p")), codes.PermissionDenied,
			[]string{"service account shop/nosy may not get servicebindings/credentials", `"orders"`, "servicebinding-credentials-reader"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := node.NodePublishVolume(ctx, tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("code %v, want %v: %v", status.Code(err), tc.code, err)
			}
			for _, r := range tc.reason {
				if !strings.Contains(err.Error(), r) {
					t.Errorf("error lacks %q: %v", r, err)
				}
			}
			if strings.Contains(err.Error(), tc.req.Secrets["csi.storage.k8s.io/serviceAccount.tokens"][10:40]) {
				t.Errorf("the error shows the token")
			}
			if tc.req.TargetPath != "" {
				if _, err := os.Stat(tc.req.TargetPath); !os.IsNotExist(err) || mountsAt(t, tc.req.TargetPath) != 0 {
					t.Errorf("a refused publish left the target path (%v)", err)
				}
			}
		})
	}
}
