package catalog

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Roles of API tokens. They are cumulative: a developer can do what a
// viewer can, an admin what a developer can.
const (
	RoleViewer    = "viewer"
	RoleDeveloper = "developer"
	RoleAdmin     = "admin"
)

var roleRank = map[string]int{RoleViewer: 1, RoleDeveloper: 2, RoleAdmin: 3}

// Allows reports whether role includes the rights of want.
func Allows(role, want string) bool { return roleRank[role] >= roleRank[want] && roleRank[want] > 0 }

// tokenPrefix marks Bindery API tokens, so that a leaked one is recognisable.
const tokenPrefix = "bdy_"

// ErrBadToken says a token is unknown, revoked or expired.
var ErrBadToken = errors.New("unknown API token")

// Token is what Bindery knows of an API token: never the token itself, only
// its SHA-256, its role and its limits.
type Token struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	Role string `json:"role"`
	// Namespaces limits the token to these namespaces; empty means all
	// (and cluster-scoped objects, such as brokers).
	Namespaces []string   `json:"namespaces,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
}

// AllNamespaces tells whether the token is not limited to namespaces.
func (t *Token) AllNamespaces() bool { return len(t.Namespaces) == 0 }

// AllowsNamespace tells whether the token may act in namespace ns.
func (t *Token) AllowsNamespace(ns string) bool {
	return t.AllNamespaces() || slices.Contains(t.Namespaces, ns)
}

// TokenRequest describes a token to issue.
type TokenRequest struct {
	Name       string
	Role       string
	Namespaces []string
	// ExpiresAt, when set, is when the token stops working.
	ExpiresAt *time.Time
}

// CreateToken makes a new API token with a role, for every namespace and
// without expiry, and returns it; only its SHA-256 is stored, so it is
// shown this once.
func (s *Store) CreateToken(ctx context.Context, role string) (string, error) {
	tok, _, err := s.IssueToken(ctx, TokenRequest{Role: role})
	return tok, err
}

// IssueToken makes a new API token as req says and returns it with its
// record; only its SHA-256 is stored, so it is shown this once.
func (s *Store) IssueToken(ctx context.Context, req TokenRequest) (string, *Token, error) {
	var errs field.ErrorList
	if roleRank[req.Role] == 0 {
		errs = append(errs, bad(field.NewPath("role"), "must be viewer, developer or admin"))
	}
	if req.Name != "" {
		errs = append(errs, validateName(field.NewPath("name"), req.Name)...)
	}
	for i, ns := range req.Namespaces {
		errs = append(errs, validateNamespace(field.NewPath("namespaces").Index(i), ns)...)
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.now()) {
		errs = append(errs, bad(field.NewPath("expiresAt"), "must be in the future"))
	}
	if err := invalid(errs); err != nil {
		return "", nil, err
	}
	if _, err := s.PruneTokens(ctx); err != nil {
		return "", nil, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, err
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	t := &Token{ID: uuid.NewString(), Name: req.Name, Role: req.Role, Namespaces: req.Namespaces, ExpiresAt: req.ExpiresAt}
	var namespaces []string
	if len(req.Namespaces) > 0 {
		namespaces = slices.Sorted(slices.Values(req.Namespaces))
		t.Namespaces = slices.Compact(namespaces)
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO catalog.api_tokens (id, hash, role, name, namespaces, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING created_at`, t.ID, sum[:], t.Role, t.Name, t.Namespaces, t.ExpiresAt).Scan(&t.CreatedAt)
	if err != nil {
		if errors.Is(mapErr(err), ErrConflict) {
			return "", nil, nameTaken("token", req.Name, "")
		}
		return "", nil, fmt.Errorf("store token: %w", mapErr(err))
	}
	return token, t, nil
}

const tokenColumns = `id::text, name, role, coalesce(namespaces, '{}'), expires_at, created_at`

func scanToken(row pgx.Row) (*Token, error) {
	var t Token
	if err := row.Scan(&t.ID, &t.Name, &t.Role, &t.Namespaces, &t.ExpiresAt, &t.CreatedAt); err != nil {
		return nil, err
	}
	if len(t.Namespaces) == 0 {
		t.Namespaces = nil
	}
	return &t, nil
}

// LookupToken returns the live token a bearer token is: unknown, revoked
// and expired tokens are ErrBadToken. The token is hashed first; the lookup
// is by the hash, which says nothing about the token. Nothing is cached, so
// a revocation takes effect at once on every replica (the lookup is one
// index read); a TokenCache saves servers that read on every request.
func (s *Store) LookupToken(ctx context.Context, token string) (*Token, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return nil, ErrBadToken
	}
	sum := sha256.Sum256([]byte(token))
	return s.lookupTokenSum(ctx, sum[:])
}

// lookupTokenSum is LookupToken by the token's SHA-256.
func (s *Store) lookupTokenSum(ctx context.Context, sum []byte) (*Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM catalog.api_tokens
		WHERE hash = $1 AND (expires_at IS NULL OR expires_at > $2)`, sum, s.now()))
	if err != nil {
		if errors.Is(mapErr(err), ErrNotFound) {
			return nil, ErrBadToken
		}
		return nil, mapErr(err)
	}
	return t, nil
}

// ListTokens lists every token's record, newest first.
func (s *Store) ListTokens(ctx context.Context) ([]*Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM catalog.api_tokens ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := []*Token{}
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		out = append(out, t)
	}
	return out, mapErr(rows.Err())
}

// RevokeToken removes a token, named by id or by name; it stops working at
// once, and so do the web sessions opened with it. An empty name is
// refused: unnamed tokens have none to be revoked by, and every one of
// them, `bindery up`'s admin token among them, would match it.
func (s *Store) RevokeToken(ctx context.Context, idOrName string) error {
	if idOrName == "" {
		return invalid(field.ErrorList{field.Required(field.NewPath("name"), "name the token by its id or its name: an unnamed token is revoked by its id")})
	}

	q := `DELETE FROM catalog.api_tokens WHERE name = $1`
	if IsID(idOrName) {
		q = `DELETE FROM catalog.api_tokens WHERE id = $1::uuid`
	}
	tag, err := s.pool.Exec(ctx, q, idOrName)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// PruneTokens removes tokens that expired more than a day ago, so the table
// does not grow with short-lived tokens.
func (s *Store) PruneTokens(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM catalog.api_tokens WHERE expires_at < $1`, s.now().Add(-24*time.Hour))
	if err != nil {
		return 0, mapErr(err)
	}
	return tag.RowsAffected(), nil
}
