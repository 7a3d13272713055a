package catalog

import "fmt"

// FieldConflictError is a conflict caused by one field's value: another
// object already holds it where only one may (an OSB externalID). It is an
// ErrConflict, so callers that only tell conflicts apart still do.
type FieldConflictError struct {
	// Field is the field's path, as in validation errors: spec.externalID.
	Field string
	// Message says what the value clashes with.
	Message string
}

func (e *FieldConflictError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrConflict, e.Field, e.Message)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *FieldConflictError) Is(target error) bool { return target == ErrConflict }

// uniqueFields names the field behind each unique index that guards a
// field's value (not an object's name).
var uniqueFields = map[string]*FieldConflictError{
	"instances_external_id_key": {Field: "spec.externalID", Message: "another instance already has this externalID; OSB instance ids are global to a broker, so leave it empty to have one generated"},
	"bindings_external_id_key":  {Field: "spec.externalID", Message: "another binding already has this externalID; OSB binding ids are global to a broker, so leave it empty to have one generated"},
}
