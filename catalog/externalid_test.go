package catalog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestExternalIDBounded: an instance's or binding's externalID, the OSB
// id its broker gets, is refused past 255 bytes or with a NUL, naming the
// field; one of 255 bytes is taken.
func TestExternalIDBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	for i, tc := range []struct {
		id, want string
	}{
		{strings.Repeat("x", 100000), "spec.externalID: must be at most 255 bytes long, not 100000"},
		{"a\x00b", "spec.externalID"},
		{strings.Repeat("y", 255), ""},
	} {
		in := newInstance("db-"+string(rune('a'+i)), catalog.InstanceSpec{ClusterServiceClassExternalName: "solo", ExternalID: tc.id})
		_, err := s.CreateInstance(ctx, in)
		b := &catalog.Binding{Spec: catalog.BindingSpec{InstanceRef: catalog.ObjectRef{Name: "db"}, ExternalID: tc.id}}
		b.Name, b.Namespace = "app-"+string(rune('a'+i)), "team"
		_, berr := s.CreateBinding(ctx, b)
		for what, err := range map[string]error{"instance": err, "binding": berr} {
			if tc.want == "" {
				if err != nil {
					t.Errorf("%s with an externalID of %d bytes: %v", what, len(tc.id), err)
				}
				continue
			}
			if _, ok := catalog.AsValidation(err); !ok || !strings.Contains(err.Error(), tc.want) || len(err.Error()) > 1000 {
				t.Errorf("%s with externalID %.20q...: %.300v, want a validation error saying %q", what, tc.id, err, tc.want)
			}
		}
	}
}
