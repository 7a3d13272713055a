package osb

import (
	"fmt"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// MaxIDLength bounds every OSB id Bindery takes (instance, binding,
// service and plan ids, in paths, bodies and its own APIs), in bytes. OSB
// ids are GUIDs in practice; the bound keeps a caller from making Bindery
// store, log and echo ids of any size. A broker's catalogue is held to
// the same bound (MaxCatalogID).
const MaxIDLength = MaxCatalogID

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
