package eventually_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bindery-dev/bindery/internal/eventually"
)

func TestPoll(t *testing.T) {
	t.Parallel()
	errNotYet := errors.New("not yet")
	tests := []struct {
		name      string
		failures  int // calls that fail before the first that succeeds
		timeout   time.Duration
		wantErr   bool
		wantCalls int // exact number of calls, 0 when it depends on timing
	}{
		{name: "holds at once", failures: 0, timeout: time.Second, wantCalls: 1},
		{name: "holds after some tries", failures: 3, timeout: 5 * time.Second, wantCalls: 4},
		{name: "never holds", failures: 1 << 30, timeout: 100 * time.Millisecond, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := eventually.Poll(context.Background(), tc.timeout, func(context.Context) error {
				calls++
				if calls <= tc.failures {
					return fmt.Errorf("call %d: %w", calls, errNotYet)
				}
				return nil
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantCalls != 0 && calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", calls, tc.wantCalls)
			}
			if !tc.wantErr {
				return
			}
			var te *eventually.TimeoutError
			if !errors.As(err, &te) || te.After != tc.timeout {
				t.Errorf("err = %#v, want a TimeoutError after %s", err, tc.timeout)
			}
			if !errors.Is(err, errNotYet) {
				t.Errorf("err = %v does not carry the condition's last error", err)
			}
			if want := fmt.Sprintf("call %d:", calls); !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want the last call's error %q", err, want)
			}
		})
	}
}

// TestPollStopsWithContext: a cancelled context ends the wait before the
// timeout.
func TestPollStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	begin := time.Now()
	err := eventually.Poll(ctx, time.Minute, func(context.Context) error {
		calls++
		if calls == 2 {
			cancel()
		}
		return errors.New("not yet")
	})
	if err == nil || time.Since(begin) > 10*time.Second {
		t.Fatalf("err = %v after %s, want an error soon after the cancel", err, time.Since(begin))
	}
}
