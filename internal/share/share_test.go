package share

import (
	"context"
	"testing"
)

// TestStreams: a party may hold StreamsPerSlot times Max streams open,
// whatever its requests; the next is refused until one closes, another
// party is not; and a party's record goes with its last stream.
func TestStreams(t *testing.T) {
	s := New(2)
	var closers []func()
	for range StreamsPerSlot * 2 {
		closed := s.Open("a")
		if closed == nil {
			t.Fatalf("stream %d of %d refused", len(closers)+1, StreamsPerSlot*2)
		}
		closers = append(closers, closed)
	}
	release := s.Acquire(context.Background(), "a")
	if release == nil {
		t.Fatal("a request of a party with its streams open was refused")
	}
	release()
	if s.Open("a") != nil {
		t.Error("a stream beyond the party's was opened")
	}
	if s.Open("b") == nil {
		t.Error("another party's stream was refused")
	}
	closers[0]()
	if closers[0] = s.Open("a"); closers[0] == nil {
		t.Error("a stream was refused once one closed")
	}
	for _, closed := range closers {
		closed()
	}
	if _, ok := s.parties["a"]; ok {
		t.Error("the party's record stayed after its last stream closed")
	}
	if New(0).Open("a") == nil || New(0).Acquire(context.Background(), "a") == nil {
		t.Error("a share of 0 refused")
	}
}
