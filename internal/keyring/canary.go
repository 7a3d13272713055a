package keyring

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
)

// canaryText is what a canary holds; only its decryption matters.
const canaryText = "bindery encryption key canary v1"

// ErrWrongKeys means the configured keys cannot open a database's canary:
// they are not the keys its data was sealed with.
var ErrWrongKeys = errors.New("the encryption keys cannot open this database's sealed data: " +
	"they are not the keys it was sealed with. Use the original key (a key's fingerprint is " +
	"`printf %s KEY | base64 -d | sha256sum | cut -c1-8`; a database restored from a backup needs the keys " +
	"of when the backup was taken); to rotate, put a new key first and keep every older key after it " +
	"(comma-separated), since values sealed with an old key are only readable with it")

// SealCanary returns a canary for a store to keep beside its sealed values:
// a known text sealed with the first key, bound to aad (the store's name).
func (k *Keyring) SealCanary(aad string) []byte {
	return k.Seal([]byte(canaryText), []byte(aad))
}

// CheckCanary tells whether the keyring opens a canary SealCanary made for
// aad. A process whose keys fail this must not start: it would seal new
// values with a key that cannot read the old ones, mixing the two.
func (k *Keyring) CheckCanary(sealed []byte, aad string) error {
	plain, err := k.Open(sealed, []byte(aad))
	if err != nil || subtle.ConstantTimeCompare(plain, []byte(canaryText)) != 1 {
		return k.wrongKeys(aad, sealed)
	}
	return nil
}

// CanaryStore is where a store keeps its canary and finds a sealed value
// of its own, so that VerifyCanary runs one protocol for every store.
type CanaryStore interface {
	// LoadCanary returns the canary, or nil when there is none yet.
	LoadCanary(ctx context.Context) ([]byte, error)
	// StoreCanary keeps sealed unless a canary exists already (a
	// concurrent first start); LoadCanary then returns the winner.
	StoreCanary(ctx context.Context, sealed []byte) error
	// SampleSealed returns one value sealed before the canary existed with
	// its associated data, or nil when the store holds none.
	SampleSealed(ctx context.Context) (sealed, aad []byte, err error)
}

// VerifyCanary checks that the keyring opens the canary of store (named
// aad), writing the canary first if the store has none, but only once the
// keyring has opened a value the store sealed before (a database from
// before canaries).
func (k *Keyring) VerifyCanary(ctx context.Context, aad string, store CanaryStore) error {
	sealed, err := store.LoadCanary(ctx)
	if err != nil {
		return fmt.Errorf("check encryption keys of %s: %w", aad, err)
	}
	if sealed == nil {
		old, oldAAD, err := store.SampleSealed(ctx)
		if err != nil {
			return fmt.Errorf("check encryption keys of %s: %w", aad, err)
		}
		if old != nil {
			if _, err := k.Open(old, oldAAD); err != nil {
				return k.wrongKeys(aad, old)
			}
		}
		if err := store.StoreCanary(ctx, k.SealCanary(aad)); err != nil {
			return fmt.Errorf("check encryption keys of %s: %w", aad, err)
		}
		if sealed, err = store.LoadCanary(ctx); err != nil {
			return fmt.Errorf("check encryption keys of %s: %w", aad, err)
		}
	}
	return k.CheckCanary(sealed, aad)
}

// wrongKeys is ErrWrongKeys for store aad, naming where the keys came
// from, the key sealed was sealed with and the keys given, by their
// fingerprints (Fingerprint): what an operator restoring a backup needs
// to find the right key.
func (k *Keyring) wrongKeys(aad string, sealed []byte) error {
	with := "a key of an unknown format"
	if fp, ok := SealedWith(sealed); ok {
		with = "key " + fp
	}
	return fmt.Errorf("%s was sealed with %s, and the encryption keys from %s are %s: %w",
		aad, with, k.source, strings.Join(k.Fingerprints(), ", "), ErrWrongKeys)
}
