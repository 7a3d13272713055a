package cni

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/types"
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
	client, err := loadKubeconfig(c.Kubeconfig)
	if err != nil {
		return "", types.NewError(types.ErrInvalidNetworkConfig, "kubeconfig "+c.Kubeconfig, err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	annotations, err := client.podAnnotations(ctx, string(k.K8S_POD_NAMESPACE), string(k.K8S_POD_NAME))
	if err != nil {
		// The kubelet retries the sandbox; the Pod may not be readable yet.
		msg := fmt.Sprintf("read Pod %s/%s from the kube-apiserver", k.K8S_POD_NAMESPACE, k.K8S_POD_NAME)
		if errors.Is(err, errPodNotFound) {
			msg = fmt.Sprintf("Pod %s/%s not found in the kube-apiserver", k.K8S_POD_NAMESPACE, k.K8S_POD_NAME)
		}
		return "", types.NewError(types.ErrTryAgainLater, msg, err.Error())
	}
	return annotations[EgressAnnotation], nil
}
