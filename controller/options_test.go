package controller_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/controller"
)

// TestOptionsRelistFlag leaves --relist-check-interval to a component
// that registered it first, as the catalog server does in `bindery up`:
// the engine then does not relist.
func TestOptionsRelistFlag(t *testing.T) {
	fs := flag.NewFlagSet("alone", flag.ContinueOnError)
	var alone controller.Options
	alone.AddFlags(fs, "listen", ":0")
	if err := fs.Parse([]string{"--relist-check-interval", "3s"}); err != nil {
		t.Fatal(err)
	}
	if alone.RelistCheck != 3*time.Second {
		t.Errorf("alone: RelistCheck %s, want 3s", alone.RelistCheck)
	}

	fs = flag.NewFlagSet("shared", flag.ContinueOnError)
	var other time.Duration
	fs.DurationVar(&other, "relist-check-interval", time.Second, "the catalog server's")
	var shared controller.Options
	shared.AddFlags(fs, "controller-listen", ":0")
	if err := fs.Parse([]string{"--relist-check-interval", "3s"}); err != nil {
		t.Fatal(err)
	}
	if shared.RelistCheck != 0 || other != 3*time.Second {
		t.Errorf("shared: engine's RelistCheck %s (want 0), the other's %s (want 3s)", shared.RelistCheck, other)
	}
}

// TestOptionsValidateReportsAll checks that every problem is reported in
// one error, each naming its flag.
func TestOptionsValidateReportsAll(t *testing.T) {
	o := controller.Options{Workers: 0, RelistCheck: -time.Second}
	err := o.Validate()
	for _, want := range []string{"--controller-workers", "--relist-check-interval", "--broker-max-inflight", "--broker-breaker-failures", "--broker-breaker-wait", "--kube-request-timeout", "--resync", "--broker-request-timeout", "--cluster-id"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	o = validOptions()
	if err := o.Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// TestOptionsKubeRequestTimeout: --kube-request-timeout reaches the
// engine's Config (TestNumericFlagsChecked in cmd/bindery has the
// commands refuse one that is not positive).
func TestOptionsKubeRequestTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arg  string
		want time.Duration
	}{
		{"", 30 * time.Second},
		{"2s", 2 * time.Second},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("controller", flag.ContinueOnError)
			var o controller.Options
			o.AddFlags(fs, "listen", ":0")
			var args []string
			if tc.arg != "" {
				args = []string{"--kube-request-timeout", tc.arg}
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if got := o.Config(nil, nil, nil).KubeTimeout; got != tc.want {
				t.Errorf("Config.KubeTimeout %s, want %s", got, tc.want)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("valid options: %v", err)
			}
		})
	}
}

// TestClusterIDChecked: --cluster-id goes to brokers as organization_guid,
// which OSB requires to be a non-empty string: empty, or text no request
// can carry, it is refused rather than replaced by the default.
func TestClusterIDChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id, err string
	}{
		{"bindery", ""},
		{"prod-eu-1 (Bindery)", ""},
		{"", "--cluster-id: must not be empty"},
		{"a\x00b", "--cluster-id: must be at most 255 bytes"},
		{"a\xffb", "--cluster-id: must be at most 255 bytes"},
		{strings.Repeat("x", 256), "--cluster-id: must be at most 255 bytes"},
	} {
		o := validOptions()
		o.ClusterID = tc.id
		err := o.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.id, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want %q", tc.id, err, tc.err)
		}
	}
}

// validOptions are options Validate accepts.
func validOptions() controller.Options {
	return controller.Options{Workers: 1, BrokerMaxInflight: 1, BreakerFailures: 1, BreakerWait: time.Second, KubeTimeout: time.Second,
		ClusterID: "bindery", Resync: time.Minute, BrokerTimeout: time.Minute, Retry: controller.Config{
			RetryBase: controller.DefaultRetryBase, RetryCap: controller.DefaultRetryCap, MaxPollingDuration: controller.DefaultMaxPollingDuration,
		}}
}
