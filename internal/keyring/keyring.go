// Package keyring encrypts secrets at rest with AES-256-GCM. A keyring holds
// one or more 32-byte keys: the first encrypts, every key decrypts, so keys
// can be rotated by putting a new key first and keeping the old ones until
// every value has been sealed again (Reseal, `bindery keys reseal`).
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// EnvVar is the environment variable that holds the keys.
const EnvVar = "BINDERY_ENCRYPTION_KEY"

const (
	version   = 1
	idLen     = 4
	headerLen = 1 + idLen
)

// ErrNoKey is returned when no encryption key was configured.
var ErrNoKey = errors.New(EnvVar + " is not set: generate a key with `head -c 32 /dev/urandom | base64` " +
	"and set " + EnvVar + " to it (several keys, comma-separated, for rotation; the first encrypts)")

// ErrDecrypt is returned when a value cannot be decrypted with any key.
var ErrDecrypt = errors.New("keyring: value cannot be decrypted with any configured key")

type key struct {
	id   [idLen]byte
	aead cipher.AEAD
}

// Keyring encrypts with its first key and decrypts with any of its keys.
type Keyring struct {
	keys []key
	// source says where the keys came from, for the errors about them.
	source string
}

// Parse reads comma-separated base64 keys of 32 bytes each, from EnvVar.
func Parse(s string) (*Keyring, error) { return ParseFrom(EnvVar, s) }

// ParseFrom is Parse for keys that came from source: a flag, a variable or
// a file, which the errors about the keys name so that the operator knows
// which to fix.
func ParseFrom(source, s string) (*Keyring, error) {
	if strings.TrimSpace(s) == "" {
		return nil, ErrNoKey
	}
	k := Keyring{source: source}
	for i, part := range strings.Split(s, ",") {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("encryption keys from %s: key %d is not base64: %w", source, i+1, err)
		}
		if len(raw) != 32 {
			return nil, fmt.Errorf("encryption keys from %s: key %d has %d bytes, want 32", source, i+1, len(raw))
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		var id [idLen]byte
		copy(id[:], sum[:idLen])
		k.keys = append(k.keys, key{id: id, aead: aead})
	}
	return &k, nil
}

// Fingerprints name the keys, in order, without revealing them: the
// first four bytes of each key's SHA-256, in hexadecimal, which every
// value a key seals carries (`printf %s KEY | base64 -d | sha256sum | cut
// -c1-8` prints a key's).
func (k *Keyring) Fingerprints() []string {
	out := make([]string, len(k.keys))
	for i, key := range k.keys {
		out[i] = hex.EncodeToString(key.id[:])
	}
	return out
}

// SealedWith is the fingerprint of the key that sealed a value, and
// whether the value has Seal's format.
func SealedWith(sealed []byte) (string, bool) {
	if len(sealed) < headerLen || sealed[0] != version {
		return "", false
	}
	return hex.EncodeToString(sealed[1:headerLen]), true
}

// Generate returns a new random key in the form Parse reads.
func Generate() string {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// Seal encrypts plaintext. aad binds the ciphertext to its context (a row's
// id, say), so a value copied to another row does not decrypt there.
func (k *Keyring) Seal(plaintext, aad []byte) []byte {
	first := k.keys[0]
	out := make([]byte, headerLen, headerLen+first.aead.NonceSize()+len(plaintext)+first.aead.Overhead())
	out[0] = version
	copy(out[1:], first.id[:])
	nonce := make([]byte, first.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out = append(out, nonce...)
	return first.aead.Seal(out, nonce, plaintext, aad)
}

// Open decrypts a value made by Seal with any key of the ring.
func (k *Keyring) Open(ciphertext, aad []byte) ([]byte, error) {
	if len(ciphertext) < headerLen || ciphertext[0] != version {
		return nil, ErrDecrypt
	}
	for _, key := range k.keys {
		if string(key.id[:]) != string(ciphertext[1:headerLen]) {
			continue
		}
		ns := key.aead.NonceSize()
		body := ciphertext[headerLen:]
		if len(body) < ns {
			return nil, ErrDecrypt
		}
		plain, err := key.aead.Open(nil, body[:ns], body[ns:], aad)
		if err != nil {
			return nil, ErrDecrypt
		}
		return plain, nil
	}
	return nil, ErrDecrypt
}
