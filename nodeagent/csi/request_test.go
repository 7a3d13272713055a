package csi

import (
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

func goodRequest() *csipb.NodePublishVolumeRequest {
	return &csipb.NodePublishVolumeRequest{
		VolumeId:         "csi-0123",
		TargetPath:       "/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/db/mount",
		VolumeCapability: &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}}},
		Readonly:         true,
		VolumeContext: map[string]string{
			AttributeBinding: "orders", keyPodNamespace: "shop", keyPodName: "web-1", keyPodUID: "u",
			keyServiceAccount: "web", keyEphemeral: "true",
		},
		Secrets: map[string]string{keyTokens: `{"bindery.dev":{"token":"s3cr3t-t0ken","expirationTimestamp":"2030-01-01T00:00:00Z"}}`},
	}
}

// TestParsePublish: what the kubelet sends for a Pod's inline volume is
// taken; a bad volume context is refused with every problem named.
func TestParsePublish(t *testing.T) {
	t.Parallel()
	p, err := parsePublish(goodRequest(), DefaultAudience)
	if err != nil {
		t.Fatal(err)
	}
	want := podInfo{namespace: "shop", name: "web-1", uid: "u", serviceAccount: "web"}
	if p.binding != "orders" || p.pod != want || p.token.value != "s3cr3t-t0ken" || !p.token.expires.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("parsed %+v", p)
	}

	// An older kubelet puts the tokens in the volume context.
	old := goodRequest()
	old.VolumeContext[keyTokens], old.Secrets = old.Secrets[keyTokens], nil
	if p, err := parsePublish(old, DefaultAudience); err != nil || p.token.value != "s3cr3t-t0ken" {
		t.Errorf("tokens in the volume context: %+v, %v", p, err)
	}

	for _, tc := range []struct {
		name   string
		change func(r *csipb.NodePublishVolumeRequest)
		want   []string
	}{
		{"empty", func(r *csipb.NodePublishVolumeRequest) { *r = csipb.NodePublishVolumeRequest{} }, []string{
			"volume_id: required", "target_path: required", "volume_capability: required", "readonly", "volume_context[binding]: required",
			"podInfoOnMount", "tokenRequests"}},
		{"relative target", func(r *csipb.NodePublishVolumeRequest) { r.TargetPath = "mount" }, []string{"must be absolute"}},
		{"block", func(r *csipb.NodePublishVolumeRequest) {
			r.VolumeCapability = &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}}
		}, []string{"only mount volumes"}},
		{"writable", func(r *csipb.NodePublishVolumeRequest) { r.Readonly = false }, []string{"readOnly: true"}},
		{"bad name", func(r *csipb.NodePublishVolumeRequest) { r.VolumeContext[AttributeBinding] = "Orders_DB" }, []string{`volume_context[binding] "Orders_DB"`}},
		{"unknown attribute", func(r *csipb.NodePublishVolumeRequest) { r.VolumeContext["secretName"] = "x" }, []string{"volume_context[secretName]: unknown attribute"}},
		{"persistent", func(r *csipb.NodePublishVolumeRequest) { r.VolumeContext[keyEphemeral] = "false" }, []string{"inline (ephemeral) volumes"}},
		{"other audience", func(r *csipb.NodePublishVolumeRequest) {
			r.Secrets[keyTokens] = `{"other":{"token":"s3cr3t-t0ken"}}`
		}, []string{`no token of audience "bindery.dev"`}},
		{"namespace with a slash", func(r *csipb.NodePublishVolumeRequest) { r.VolumeContext[keyPodNamespace] = "../../other" }, []string{`volume_context[csi.storage.k8s.io/pod.namespace] "../../other"`}},
		{"namespace with a NUL", func(r *csipb.NodePublishVolumeRequest) { r.VolumeContext[keyPodNamespace] = "shop\x00" }, []string{`volume_context[csi.storage.k8s.io/pod.namespace]`}},
		{"long namespace", func(r *csipb.NodePublishVolumeRequest) { r.VolumeContext[keyPodNamespace] = strings.Repeat("a", 64) }, []string{"must be no more than 63"}},
		{"garbled tokens", func(r *csipb.NodePublishVolumeRequest) { r.Secrets[keyTokens] = `s3cr3t-t0ken` }, []string{"not the kubelet's JSON map"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := goodRequest()
			tc.change(r)
			_, err := parsePublish(r, DefaultAudience)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}
