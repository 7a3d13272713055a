package postgresql

import (
	"crypto/sha256"
	"encoding/hex"
)

// Prefixes of the names this driver gives to databases and roles. Together
// with a hash of an OSB id they make every name: no text a user chose ever
// reaches SQL, and a name never exceeds PostgreSQL's 63-byte limit.
const (
	DatabasePrefix    = "bindery_i_"
	OwnerPrefix       = "bindery_o_"
	BindingRolePrefix = "bindery_b_"
)

// Names are the PostgreSQL objects that make up one instance.
type Names struct {
	// Database is the instance's database.
	Database string
	// Owner is the NOLOGIN role that owns the database and everything the
	// bindings create in it.
	Owner string
}

// InstanceNames derives the names of an instance's objects from its id.
func InstanceNames(instanceID string) Names {
	h := idHash(instanceID)
	return Names{Database: DatabasePrefix + h, Owner: OwnerPrefix + h}
}

// BindingRole derives the login role of a binding from its id.
func BindingRole(bindingID string) string {
	return BindingRolePrefix + idHash(bindingID)
}

// idHash is the first 24 hex digits (96 bits) of the id's SHA-256: short
// enough for a name, long enough that ids do not collide.
func idHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:12])
}
