package postgresql_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/bindery-dev/bindery/broker/postgresql"
	"github.com/bindery-dev/bindery/internal/pgtest"
)

// TestSCRAMVerifierRFC7677 checks a verifier the way a server uses it,
// against the exchange in RFC 7677 section 3 (user "user", password
// "pencil"): the client's proof must match StoredKey, and ServerKey must
// sign the exchange as the RFC's server did.
func TestSCRAMVerifierRFC7677(t *testing.T) {
	t.Parallel()
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	v, err := postgresql.SCRAMVerifier("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^SCRAM-SHA-256\$4096:W22ZaJ0SNY7soEsUEjb6gQ==\$([A-Za-z0-9+/=]{44}):([A-Za-z0-9+/=]{44})$`).FindStringSubmatch(v)
	if m == nil {
		t.Fatalf("verifier %q is not in PostgreSQL's format", v)
	}
	storedKey, _ := base64.StdEncoding.DecodeString(m[1])
	serverKey, _ := base64.StdEncoding.DecodeString(m[2])

	const (
		clientFirstBare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
		serverFirst     = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
		clientFinalBare = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
		clientProof     = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
		serverSignature = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
	)
	authMessage := clientFirstBare + "," + serverFirst + "," + clientFinalBare
	mac := func(key []byte) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(authMessage))
		return h.Sum(nil)
	}
	proof, _ := base64.StdEncoding.DecodeString(clientProof)
	clientKey := mac(storedKey) // ClientSignature, then XOR with the proof
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	if sum := sha256.Sum256(clientKey); !bytes.Equal(sum[:], storedKey) {
		t.Errorf("the RFC's client proof does not match StoredKey %s", m[1])
	}
	if got := base64.StdEncoding.EncodeToString(mac(serverKey)); got != serverSignature {
		t.Errorf("server signature %s, want %s", got, serverSignature)
	}
}

func TestHashPassword(t *testing.T) {
	t.Parallel()
	p := postgresql.NewPassword()
	if len(p) != 43 || strings.Trim(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		t.Errorf("password %q: want 43 base64url characters", p)
	}
	if p == postgresql.NewPassword() {
		t.Error("two passwords are equal")
	}
	v1, err := postgresql.HashPassword(p)
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := postgresql.HashPassword(p)
	if v1 == v2 {
		t.Error("two verifiers of one password share a salt")
	}
	if !regexp.MustCompile(`^SCRAM-SHA-256\$4096:[A-Za-z0-9+/]{22}==\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$`).MatchString(v1) {
		t.Errorf("verifier %q: want a 16-byte salt in PostgreSQL's format", v1)
	}
	if strings.Contains(v1, p) {
		t.Error("the verifier contains the password")
	}
}

// TestSCRAMVerifierMatchesPostgreSQL has PostgreSQL hash a password itself
// and recomputes the verifier with PostgreSQL's salt: they must be equal.
// Then a role given only our verifier logs in over TCP with SCRAM.
func TestSCRAMVerifierMatchesPostgreSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.AdminURL(t)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	password := postgresql.NewPassword()
	role := postgresql.BindingRole(randomID(t))
	t.Cleanup(func() { mustExec(t, admin, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()) })

	// PostgreSQL salts and hashes a plaintext password itself here; this
	// test alone sends one, to obtain a reference.
	if _, err := conn.Exec(ctx, "SET password_encryption = 'scram-sha-256'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD '"+password+"'"); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^SCRAM-SHA-256\$4096:([^$]+)\$`).FindStringSubmatch(stored)
	if m == nil {
		t.Fatalf("PostgreSQL stored %q", stored)
	}
	salt, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		t.Fatal(err)
	}
	ours, err := postgresql.SCRAMVerifier(password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if ours != stored {
		t.Fatalf("our verifier\n\t%s\nPostgreSQL's\n\t%s", ours, stored)
	}

	// A fixed salt of our own, sent as the verifier only.
	fixed, err := postgresql.SCRAMVerifier(password, []byte("0123456789abcdef"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" PASSWORD '"+fixed+"'"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role).Scan(&stored); err != nil || stored != fixed {
		t.Fatalf("stored %q (%v), want the verifier as sent", stored, err)
	}
	login := withUser(t, admin, role, password)
	c, err := pgx.Connect(ctx, login)
	if err != nil {
		t.Fatalf("log in with the password behind the verifier: %v", err)
	}
	c.Close(ctx)
	_, err = pgx.Connect(ctx, withUser(t, admin, role, password+"x"))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
		t.Fatalf("log in with a wrong password: %v, want invalid_password", err)
	}
}
