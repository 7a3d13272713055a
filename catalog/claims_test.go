package catalog_test

import (
	"context"
	"fmt"
	"testing"
)

// TestClaimer: a claim excludes every other process's claim of the key
// until released; one process holds many claims on a few sessions, and
// closing its claimer releases them all.
func TestClaimer(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	a, err := store.NewClaimer(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.NewClaimer(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var releases []func()
	for i := range 50 {
		release, ok, err := a.Claim(ctx, fmt.Sprintf("instance/%d", i))
		if err != nil || !ok {
			t.Fatalf("claim %d: ok %v, %v", i, ok, err)
		}
		releases = append(releases, release)
	}
	if _, ok, err := b.Claim(ctx, "instance/7"); err != nil || ok {
		t.Errorf("another process claimed a held key: ok %v, %v", ok, err)
	}
	releases[7]()
	release, ok, err := b.Claim(ctx, "instance/7")
	if err != nil || !ok {
		t.Errorf("a released key could not be claimed: ok %v, %v", ok, err)
	} else {
		release()
	}
	a.Close()
	release, ok, err = b.Claim(ctx, "instance/8")
	if err != nil || !ok {
		t.Errorf("a closed claimer's key could not be claimed: ok %v, %v", ok, err)
	} else {
		release()
	}
	releases[9]() // released with its session already: no error, no effect
}
