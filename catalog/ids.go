package catalog

import "github.com/google/uuid"

// IsID tells whether s is an object id as the catalog writes them: a UUID
// in its canonical form of 36 characters (either case). Go's uuid package
// also reads urn:uuid:…, braced and unhyphenated forms, and PostgreSQL
// refuses the first as a uuid (22P02), which made a request naming one a
// 500. Every id that comes from a request is checked with IsID before it
// reaches a query: one that is not one names no object (or is a name).
func IsID(s string) bool {
	return len(s) == 36 && uuid.Validate(s) == nil
}
