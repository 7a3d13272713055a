package catalog

import (
	"errors"
	"regexp"
	"strings"
)

// FieldError is one problem with one field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every problem of a request, each with its field.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Field + ": " + fe.Message
	}
	return strings.Join(parts, "; ")
}

func invalid(errs ...FieldError) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// AsValidation finds a *ValidationError in err's chain.
func AsValidation(err error) (*ValidationError, bool) {
	var v *ValidationError
	ok := errors.As(err, &v)
	return v, ok
}

// ErrUnprocessable is the kind of an error about the state of things rather
// than the request's form: a removed plan, a forbidden plan change.
var ErrUnprocessable = errors.New("unprocessable")

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// checkName checks a Kubernetes object name (DNS-1123 subdomain).
func checkName(field, name string, errs *[]FieldError) {
	switch {
	case name == "":
		*errs = append(*errs, FieldError{field, "required"})
	case len(name) > 253:
		*errs = append(*errs, FieldError{field, "must be at most 253 characters"})
	case !nameRE.MatchString(name):
		*errs = append(*errs, FieldError{field, "must consist of lower case letters, digits, '-' and '.', and start and end with a letter or digit"})
	}
}

var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checkNamespace checks a namespace name (DNS-1123 label).
func checkNamespace(field, ns string, errs *[]FieldError) {
	if len(ns) > 63 || !namespaceRE.MatchString(ns) {
		*errs = append(*errs, FieldError{field, "must be a DNS label: lower case letters, digits and '-', at most 63 characters"})
	}
}
