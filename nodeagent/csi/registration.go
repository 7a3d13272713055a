package csi

import (
	"context"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/bindery-dev/bindery/nodeagent/internal/socket"
)

// registration answers the kubelet's plugin watcher
// (https://kubernetes.io/docs/concepts/storage/volumes/#csi, the
// pluginregistration v1 API): it finds the registration socket in its
// directory, asks what the plugin is, and says whether it took it.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	d *Driver
}

// GetInfo says this is a CSI plugin, its name, where its CSI socket is as
// the kubelet sees it, and the CSI versions it speaks.
func (r registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              Name,
		Endpoint:          filepath.Join(r.d.opts.KubeletPluginDir, filepath.Base(r.d.socket)),
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

// NotifyRegistrationStatus is the kubelet's answer.
func (r registration) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.d.registered.Store(st.PluginRegistered)
	r.d.metrics.registered.Set(boolGauge(st.PluginRegistered))
	if st.PluginRegistered {
		r.d.log.Info("registered with the kubelet", "driver", Name)
	} else {
		r.d.log.Error("the kubelet refused the driver", "driver", Name, "err", st.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// watchRegistration serves the registration socket again when it is
// deleted (by hand, or a cleanup of the directory): the plugin watcher
// registers the driver again when the socket reappears, as it does when
// the kubelet restarts and finds the socket in place.
func (d *Driver) watchRegistration(ctx context.Context, srv *grpc.Server) {
	stamp := socket.StampOf(d.regSocket)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if now := socket.StampOf(d.regSocket); now.Exists() && now == stamp {
			continue
		}
		d.registered.Store(false)
		d.metrics.registered.Set(0)
		l, err := listen(ctx, d.regSocket)
		if err != nil {
			d.log.Warn("serve the registration socket again", "err", err)
			continue
		}
		d.log.Info("registration socket was gone; serving it again", "socket", d.regSocket)
		stamp = socket.StampOf(d.regSocket)
		go func() { _ = srv.Serve(l) }()
	}
}
