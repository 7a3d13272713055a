package catalog_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/osbtest"
)

// TestDuplicateOfferNamed: a broker whose catalogue offers a service id
// another broker already offers cannot store it; its status names the
// service, its id and the other broker, in words (not a constraint's
// name). A second object of a taken name names the object and where.
func TestDuplicateOfferNamed(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	first := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	copycat := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(first.Catalog()))
	a := register(t, s, "original", first.URL(), "")
	if _, err := s.Relist(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	b := register(t, s, "copycat", copycat.URL(), "")
	got, err := s.Relist(ctx, b.ID)
	if err == nil {
		t.Fatal("a catalogue of another broker's ids was stored")
	}
	svc := first.Catalog()[0]
	msg := ready(got).Message
	for _, want := range []string{`Its service "` + svc.Name + `" (id ` + svc.ID + `) is already offered by broker "original"`, "OSB ids must be unique"} {
		if !strings.Contains(msg, want) {
			t.Errorf("status %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "_key") || strings.Contains(msg, "23505") {
		t.Errorf("status shows the database's words: %q", msg)
	}

	_, err = s.CreateBroker(ctx, &catalog.Broker{Meta: catalog.Meta{Name: "original"}, Spec: catalog.BrokerSpec{URL: first.URL()}}, nil)
	var ce *catalog.ConflictError
	if !errors.As(err, &ce) || !ce.Taken || !catalog.IsNameTaken(err) || !errors.Is(err, catalog.ErrConflict) ||
		ce.Message != `A broker named "original" already exists: choose another name, or delete that one first.` {
		t.Errorf("a taken broker name: %v", err)
	}
}

// TestDuplicateOfRemovedOfferNamed: a service another broker no longer
// offers, kept for the instance that holds it, still takes its id; the
// refusal says so, rather than that the other broker offers it.
func TestDuplicateOfRemovedOfferNamed(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	first := osbtest.New(t, osbtest.WithBasicAuth("u", "p"))
	offered := first.Catalog()
	a := register(t, s, "original", first.URL(), "")
	if _, err := s.Relist(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateInstance(ctx, instanceOf("team-a", "db", offered[0].Plans[0].Name)); err != nil {
		t.Fatal(err)
	}
	first.SetCatalog([]osbtest.Service{})
	if _, err := s.Relist(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	copycat := osbtest.New(t, osbtest.WithBasicAuth("u", "p"), osbtest.WithCatalog(offered))
	got, err := s.Relist(ctx, register(t, s, "copycat", copycat.URL(), "").ID)
	if err == nil {
		t.Fatal("a catalogue of ids another broker's kept rows hold was stored")
	}
	if msg := ready(got).Message; !strings.Contains(msg, `has the id of one broker "original" no longer offers but Bindery keeps`) {
		t.Errorf("status %q does not say the other broker no longer offers it", msg)
	}
}
