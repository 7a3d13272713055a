package osb

import (
	"fmt"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// MaxIDLength bounds every OSB id Bindery takes (instance, binding,
// service and plan ids, in paths, bodies and its own APIs), in bytes. OSB
// ids are GUIDs in practice; the bound keeps a caller from making Bindery
// store, log and echo ids of any size.
const MaxIDLength = 255

// IDProblem says what makes id unfit to be an OSB id, or "" when it is
// fit: empty, longer than MaxIDLength, or not storable (pgtext).
func IDProblem(id string) string {
	switch {
	case id == "":
		return "must not be empty"
	case len(id) > MaxIDLength:
		return fmt.Sprintf("must be at most %d bytes long, not %d", MaxIDLength, len(id))
	}
	return pgtext.Problem(id)
}

// longID reports, through bad, a catalogue's service or plan id (at path)
// longer than MaxIDLength.
func longID(bad func(format string, args ...any), path, id string) {
	if len(id) > MaxIDLength {
		bad("%s.id: %s", path, IDProblem(id))
	}
}
