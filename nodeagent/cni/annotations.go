package cni

import (
	"context"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"
)

// apiTimeout bounds the lookup of a Pod in the kube-apiserver: the runtime
// waits for ADD, and retries the whole sandbox when it fails.
const apiTimeout = 5 * time.Second

// egressValue returns the Pod's egress annotation: from the runtime when it
// passed the Pod's annotations, otherwise from the kube-apiserver. A
// container that is no Kubernetes Pod (no K8S_POD_NAME) is granted nothing.
func egressValue(ctx context.Context, c *NetConf, cniArgs string) (string, error) {
	if c.RuntimeConfig.PodAnnotations != nil {
		return c.RuntimeConfig.PodAnnotations[EgressAnnotation], nil
	}
	var k k8sArgs
	if err := types.LoadArgs(cniArgs, &k); err != nil {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS", err.Error())
	}
	if k.K8S_POD_NAME == "" {
		return "", nil
	}
	if c.Kubeconfig == "" {
		return "", types.NewError(types.ErrInvalidNetworkConfig,
			"kubeconfig: needed to read the Pod's annotations, which the runtime did not pass (capability "+PodAnnotationsCapability+")", "")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return "", types.NewError(types.ErrInvalidNetworkConfig, "kubeconfig: load "+c.Kubeconfig, err.Error())
	}
	cfg.Timeout = apiTimeout
	cfg.UserAgent = PluginType
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return "", types.NewError(types.ErrInvalidNetworkConfig, "kubeconfig: client for "+c.Kubeconfig, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pod, err := client.Resource(pods).Namespace(string(k.K8S_POD_NAMESPACE)).Get(ctx, string(k.K8S_POD_NAME), metav1.GetOptions{})
	if err != nil {
		// The kubelet retries the sandbox; the Pod may not be readable yet.
		return "", types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("read Pod %s/%s from the kube-apiserver", k.K8S_POD_NAMESPACE, k.K8S_POD_NAME), err.Error())
	}
	return pod.Annotations[EgressAnnotation], nil
}
