package catalog_test

import (
	"context"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestRevokeTokenByEmptyName: revoking by an empty name is refused,
// naming the field, and revokes nothing. Unnamed tokens have no name to be
// revoked by. Before, it deleted every token without a name, the admin
// token `bindery up` makes among them, locking everyone out.
func TestRevokeTokenByEmptyName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	admin, err := s.CreateToken(ctx, catalog.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := s.CreateToken(ctx, catalog.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	named, _, err := s.IssueToken(ctx, catalog.TokenRequest{Name: "ci", Role: catalog.RoleDeveloper})
	if err != nil {
		t.Fatal(err)
	}
	err = s.RevokeToken(ctx, "")
	if v, ok := catalog.AsValidation(err); !ok || len(v.Errors) != 1 || v.Errors[0].Field != "name" {
		t.Errorf("revoking by an empty name: %v, want a validation error naming the name", err)
	}
	for _, tok := range []string{admin, viewer, named} {
		if _, err := s.LookupToken(ctx, tok); err != nil {
			t.Errorf("a token was revoked by an empty name: %v", err)
		}
	}
}
