package apiserver_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/apiserver"
)

// TestDurationFlags: --kube-request-timeout (10 s by default) and
// --watch-bookmark-interval (a minute) reach Options, and a value that is
// not positive is refused, naming the flag, rather than read as "no
// bound" or as the default.
func TestDurationFlags(t *testing.T) {
	t.Parallel()
	kubeTimeout := func(f *apiserver.Flags) time.Duration { return f.KubeTimeout }
	bookmarks := func(f *apiserver.Flags) time.Duration { return f.BookmarkInterval }
	for _, tc := range []struct {
		flag, arg string
		got       func(*apiserver.Flags) time.Duration
		want      time.Duration
		err       string
	}{
		{"kube-request-timeout", "", kubeTimeout, 10 * time.Second, ""},
		{"kube-request-timeout", "2s", kubeTimeout, 2 * time.Second, ""},
		{"kube-request-timeout", "0s", kubeTimeout, 0, "--kube-request-timeout: must be positive"},
		{"kube-request-timeout", "-1s", kubeTimeout, 0, "--kube-request-timeout: must be positive"},
		{"watch-bookmark-interval", "", bookmarks, time.Minute, ""},
		{"watch-bookmark-interval", "5s", bookmarks, 5 * time.Second, ""},
		{"watch-bookmark-interval", "0s", bookmarks, 0, "--watch-bookmark-interval: must be positive"},
		{"watch-bookmark-interval", "-1s", bookmarks, 0, "--watch-bookmark-interval: must be positive"},
	} {
		t.Run(tc.flag+"="+tc.arg, func(t *testing.T) {
			t.Parallel()
			fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
			var f apiserver.Flags
			f.AddFlags(fs)
			args := []string{"--listen", "127.0.0.1:0"}
			if tc.arg != "" {
				args = append(args, "--"+tc.flag, tc.arg)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := f.Complete(); err != nil {
				t.Fatal(err)
			}
			err := f.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("valid flags: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error lacks %q: %v", tc.err, err)
			}
			if got := tc.got(&f); tc.err == "" && got != tc.want {
				t.Errorf("Options: %s, want %s", got, tc.want)
			}
		})
	}
}
