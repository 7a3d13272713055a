package postgresql

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
)

// SCRAMIterations is the PBKDF2 iteration count of the verifiers this
// driver makes, PostgreSQL's default (scram_iterations).
const SCRAMIterations = 4096

// NewPassword returns a fresh password: 32 random bytes, base64url without
// padding (43 characters, safe in URLs and connection strings).
func NewPassword() string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails.
	return base64.RawURLEncoding.EncodeToString(raw)
}

// HashPassword returns the SCRAM-SHA-256 verifier of password with a fresh
// 16-byte salt, ready for CREATE ROLE ... PASSWORD: PostgreSQL stores a
// verifier as it is, so the password itself never reaches the server or its
// logs.
func HashPassword(password string) (string, error) {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	return SCRAMVerifier(password, salt, SCRAMIterations)
}

// SCRAMVerifier computes a SCRAM-SHA-256 verifier (RFC 5802, RFC 7677) in
// the form PostgreSQL keeps in pg_authid.rolpassword:
//
//	SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
//
// with standard base64. PostgreSQL first normalises the password with
// SASLprep; the passwords NewPassword makes are ASCII, which SASLprep leaves
// unchanged, so the caller must not pass other text.
func SCRAMVerifier(password string, salt []byte, iterations int) (string, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("derive scram key: %w", err)
	}
	clientKey := hmacSHA256(salted, "Client Key")
	storedKey := sha256.Sum256(clientKey)
	serverKey := hmacSHA256(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return "SCRAM-SHA-256$" + strconv.Itoa(iterations) + ":" + b64(salt) +
		"$" + b64(storedKey[:]) + ":" + b64(serverKey), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
