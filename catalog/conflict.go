package catalog

import (
	"errors"
	"fmt"

	"github.com/bindery-dev/bindery/internal/message"
)

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

// ConflictError is a conflict the doors show as it is: a name that is
// taken (Message names the object and where), or an object that changed
// since the caller read it (Stale). It is an ErrConflict.
type ConflictError struct {
	// Message says it in a sentence for people.
	Message string
	// Stale: the object changed since it was read; reading it again and
	// retrying may succeed.
	Stale bool
	// Taken: the name of a new object is taken (Kubernetes' AlreadyExists).
	Taken bool
}

func (e *ConflictError) Error() string { return e.Message }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// UnprocessableError is a request the state of things refuses (an object
// being deleted, a plan that cannot be changed): Message says why, and
// what to do, for people. It is an ErrUnprocessable.
type UnprocessableError struct{ Message string }

func (e *UnprocessableError) Error() string { return e.Message }

// Is makes errors.Is(err, ErrUnprocessable) true.
func (e *UnprocessableError) Is(target error) bool { return target == ErrUnprocessable }

// conflictf makes a ConflictError of a sentence.
func conflictf(format string, a ...any) error {
	return &ConflictError{Message: fmt.Sprintf(format, a...)}
}

// unprocessablef makes an UnprocessableError of a sentence.
func unprocessablef(format string, a ...any) error {
	return &UnprocessableError{Message: fmt.Sprintf(format, a...)}
}

// nameTaken is the conflict of a new object whose name is taken.
func nameTaken(kind, name, namespace string) error {
	return &ConflictError{Message: message.Exists(kind, name, namespace), Taken: true}
}

// stale is the conflict of a write that expected an older resourceVersion.
func stale(kind, namespace, name string) error {
	n := name
	if namespace != "" {
		n = namespace + "/" + name
	}
	return &ConflictError{Message: message.Changed(kind, n), Stale: true}
}

// IsStale tells whether err is a conflict of an object changed since it
// was read, which a fresh read and a retry may get past.
func IsStale(err error) bool {
	var c *ConflictError
	return errors.As(err, &c) && c.Stale
}

// IsNameTaken tells whether err is the conflict of a new object whose name
// is taken.
func IsNameTaken(err error) bool {
	var c *ConflictError
	return errors.As(err, &c) && c.Taken
}

// ProblemMessage is what the doors show of a catalog error that is for
// people as it is (a ConflictError, an UnprocessableError, a
// FieldConflictError's message); ok is false for any other error.
func ProblemMessage(err error) (msg string, ok bool) {
	var c *ConflictError
	var u *UnprocessableError
	var f *FieldConflictError
	switch {
	case errors.As(err, &c):
		return c.Message, true
	case errors.As(err, &u):
		return u.Message, true
	case errors.As(err, &f):
		return message.Capitalise(f.Message) + ".", true
	}
	return "", false
}
