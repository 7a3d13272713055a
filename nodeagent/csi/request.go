package csi

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The volume context: what a Pod's volume says (AttributeBinding), and
// what the kubelet adds for a CSIDriver with podInfoOnMount and
// tokenRequests (https://kubernetes-csi.github.io/docs/pod-info.html,
// https://kubernetes-csi.github.io/docs/token-requests.html).
const (
	// AttributeBinding names a servicecatalog.k8s.io ServiceBinding in the
	// Pod's namespace: the only attribute a volume sets.
	AttributeBinding = "binding"

	keyPodName        = "csi.storage.k8s.io/pod.name"
	keyPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	keyPodUID         = "csi.storage.k8s.io/pod.uid"
	keyServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	keyEphemeral      = "csi.storage.k8s.io/ephemeral"
	keyTokens         = "csi.storage.k8s.io/serviceAccount.tokens"
	kubeletPrefix     = "csi.storage.k8s.io/"
)

// publish is a checked NodePublishVolume request.
type publish struct {
	volumeID string
	target   string
	binding  string
	pod      podInfo
	token    token
	group    int // the Pod's fsGroup (volume_mount_group), or noGroup
}

// podInfo is who the volume is for.
type podInfo struct {
	namespace, name, uid, serviceAccount string
}

func (p podInfo) String() string { return p.namespace + "/" + p.name }

// token is the Pod's service-account token for Bindery's audience.
type token struct {
	value   string
	expires time.Time
}

// parsePublish checks a NodePublishVolume request and returns every
// problem at once, each naming its field, for an InvalidArgument answer.
// audience is the one the CSIDriver asks the kubelet for.
func parsePublish(req *csipb.NodePublishVolumeRequest, audience string) (*publish, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	p := &publish{volumeID: req.GetVolumeId(), target: req.GetTargetPath()}
	if p.volumeID == "" {
		bad("volume_id: required")
	}
	if err := checkTarget(p.target); err != nil {
		bad("%v", err)
	}
	switch c := req.GetVolumeCapability(); {
	case c == nil:
		bad("volume_capability: required")
	case c.GetMount() == nil:
		bad("volume_capability: only mount volumes; a binding is files, not a block device")
	}
	p.group = noGroup
	if g := req.GetVolumeCapability().GetMount().GetVolumeMountGroup(); g != "" {
		n, err := strconv.ParseUint(g, 10, 31)
		if err != nil {
			bad("volume_capability.mount.volume_mount_group %q: not a group ID", g)
		}
		p.group = int(n)
	}
	if !req.GetReadonly() {
		bad("readonly: the volume must be readOnly: true, as the credentials are replaced under the Pod")
	}
	vc := req.GetVolumeContext()
	p.binding = vc[AttributeBinding]
	switch {
	case p.binding == "":
		bad("volume_context[%s]: required, the name of a servicecatalog.k8s.io ServiceBinding in the Pod's namespace", AttributeBinding)
	default:
		for _, msg := range validation.IsDNS1123Subdomain(p.binding) {
			bad("volume_context[%s] %q: %s", AttributeBinding, p.binding, msg)
		}
	}
	var unknown []string
	for k := range vc {
		if k != AttributeBinding && !strings.HasPrefix(k, kubeletPrefix) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		bad("volume_context[%s]: unknown attribute; the only one is %q", k, AttributeBinding)
	}
	if e, ok := vc[keyEphemeral]; ok && e != "true" {
		bad("volume_context[%s] = %q: csi.bindery.dev serves inline (ephemeral) volumes of Pods only", keyEphemeral, e)
	}
	p.pod = podInfo{namespace: vc[keyPodNamespace], name: vc[keyPodName], uid: vc[keyPodUID], serviceAccount: vc[keyServiceAccount]}
	if p.pod.namespace == "" {
		bad("volume_context[%s]: missing; the CSIDriver csi.bindery.dev must have podInfoOnMount: true", keyPodNamespace)
	} else {
		// The namespace goes into the path of the credentials' URL.
		for _, msg := range validation.IsDNS1123Label(p.pod.namespace) {
			bad("volume_context[%s] %q: %s", keyPodNamespace, p.pod.namespace, msg)
		}
	}
	var err error
	if p.token, err = findToken(req, audience); err != nil {
		bad("%v", err)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return p, nil
}

// checkTarget refuses a target path that is not absolute and clean, or
// holds a NUL: the kubelet sends clean paths of its own making, and a
// ".." or a NUL is bad input, never something to mount at.
func checkTarget(target string) error {
	switch {
	case target == "":
		return errors.New("target_path: required")
	case strings.ContainsRune(target, 0):
		return fmt.Errorf("target_path %q: holds a NUL", target)
	case !filepath.IsAbs(target):
		return fmt.Errorf("target_path %q: must be absolute", target)
	case filepath.Clean(target) != target:
		return fmt.Errorf("target_path %q: must be a clean path (no \"..\", \".\", \"//\" or trailing slash)", target)
	}
	return nil
}

// findToken reads the Pod's token for audience from the request's secrets
// (CSIDriver serviceAccountTokenInSecrets: true) or, from older kubelets,
// its volume context.
func findToken(req *csipb.NodePublishVolumeRequest, audience string) (token, error) {
	raw, where := req.GetSecrets()[keyTokens], "secrets"
	if raw == "" {
		raw, where = req.GetVolumeContext()[keyTokens], "volume_context"
	}
	if raw == "" {
		return token{}, fmt.Errorf("%s: no service-account token; the CSIDriver csi.bindery.dev must have tokenRequests [{audience: %s}]", keyTokens, audience)
	}
	var tokens map[string]struct {
		Token               string    `json:"token"`
		ExpirationTimestamp time.Time `json:"expirationTimestamp"`
	}
	if err := json.Unmarshal([]byte(raw), &tokens); err != nil {
		// The value is a credential: say nothing of it.
		return token{}, fmt.Errorf("%s[%s]: not the kubelet's JSON map of tokens", where, keyTokens)
	}
	t, ok := tokens[audience]
	if !ok || t.Token == "" {
		return token{}, fmt.Errorf("%s[%s]: no token of audience %q; the CSIDriver's tokenRequests must name it", where, keyTokens, audience)
	}
	return token{value: t.Token, expires: t.ExpirationTimestamp}, nil
}
