package keyring

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestSealOpenAndRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := Generate(), Generate()
	old, err := Parse(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed := old.Seal([]byte("s3cret"), []byte("row-1"))
	if bytes.Contains(sealed, []byte("s3cret")) {
		t.Fatal("plaintext visible in ciphertext")
	}
	rotated, err := Parse(newKey + "," + oldKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rotated.Open(sealed, []byte("row-1"))
	if err != nil || string(got) != "s3cret" {
		t.Fatalf("open with rotated ring: %q, %v", got, err)
	}
	if _, err := rotated.Open(sealed, []byte("row-2")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("open with other aad: %v, want ErrDecrypt", err)
	}
	onlyNew, _ := Parse(newKey)
	if _, err := onlyNew.Open(sealed, []byte("row-1")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("open without the old key: %v, want ErrDecrypt", err)
	}
	resealed := rotated.Seal(got, []byte("row-1"))
	if _, err := onlyNew.Open(resealed, []byte("row-1")); err != nil {
		t.Fatalf("new ring opens a value sealed after rotation: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", "is not set"},
		{"!!!", "not base64"},
		{"c2hvcnQ=", "has 5 bytes"},
		{Generate() + ",c2hvcnQ=", "key 2 has 5 bytes"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("Parse(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
		if tc.in == "" {
			continue
		}
		// The error names where the keys came from, so the operator
		// knows which to fix.
		for _, source := range []string{EnvVar, "/data/encryption.key"} {
			_, err := ParseFrom(source, tc.in)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte("from "+source+":")) {
				t.Errorf("ParseFrom(%q, %q) = %v, want it to name %s", source, tc.in, err, source)
			}
		}
	}
}

func TestCanary(t *testing.T) {
	old, other := Generate(), Generate()
	k, _ := Parse(old)
	sealed := k.SealCanary("catalog")
	for _, tc := range []struct {
		keys, aad string
		ok        bool
	}{
		{old, "catalog", true},
		{other + "," + old, "catalog", true}, // rotated: the old key is kept
		{other, "catalog", false},            // a wrong but valid key
		{old, "broker", false},               // another store's canary
	} {
		ring, err := ParseFrom("--encryption-key", tc.keys)
		if err != nil {
			t.Fatal(err)
		}
		err = ring.CheckCanary(sealed, tc.aad)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrWrongKeys)) {
			t.Errorf("keys %q aad %q: %v, want ok=%v", tc.keys, tc.aad, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "keys from --encryption-key") {
			t.Errorf("keys %q aad %q: %v does not say where the keys came from", tc.keys, tc.aad, err)
		}
		// It names the key the canary needs and the keys given, by
		// fingerprint, and none of the keys themselves.
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "sealed with key "+fingerprint(t, old)) || !strings.Contains(msg, strings.Join(ring.Fingerprints(), ", ")) {
				t.Errorf("keys %q: %q names neither the key needed nor the keys given", tc.keys, msg)
			}
			for _, key := range strings.Split(tc.keys+","+old, ",") {
				if strings.Contains(msg, key) {
					t.Errorf("the error shows a key: %q", msg)
				}
			}
		}
	}
}

// fingerprint is a key's fingerprint as the documented shell command
// prints it: the first 8 hexadecimal digits of the SHA-256 of its bytes.
func fingerprint(t *testing.T, key string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:8]
}
