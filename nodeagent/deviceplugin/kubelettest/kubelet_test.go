package kubelettest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/bindery-dev/bindery/nodeagent/deviceplugin/kubelettest"
)

// TestRegisterValidates checks the harness itself: it refuses what the
// kubelet refuses, and dials the plugin before answering.
func TestRegisterValidates(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "kt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	stale := filepath.Join(dir, "stale.sock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	k, err := kubelettest.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("start left %s: %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Errorf("start removed a directory: %v", err)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := pluginapi.NewRegistrationClient(conn)
	tests := []struct {
		name string
		req  *pluginapi.RegisterRequest
		want string
	}{
		{"old version", &pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "p.sock", ResourceName: "example.com/foo"}, "not supported"},
		{"native resource", &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "p.sock", ResourceName: "kubernetes.io/foo"}, "invalid"},
		{"no domain", &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "p.sock", ResourceName: "foo"}, "invalid"},
		{"endpoint outside the directory", &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "../p.sock", ResourceName: "example.com/foo"}, "not a file name"},
		{"nobody on the endpoint", &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "p.sock", ResourceName: "example.com/foo"}, "deadline"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := c.Register(ctx, tt.req)
		cancel()
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
			t.Errorf("%s: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	if got := k.Registrations("example.com/foo"); got != 0 {
		t.Errorf("registrations = %d, want 0", got)
	}
}
