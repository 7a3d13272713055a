package catalog

import (
	"errors"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/message"
	"github.com/bindery-dev/bindery/internal/osb"
)

// ValidationError lists every problem of a request, each with its field
// path: apimachinery's field.ErrorList, the shape the Kubernetes API
// reports them in, which the REST API maps to its own error body.
type ValidationError struct {
	Errors field.ErrorList
}

// Error lists every problem with its field path, for API clients and
// logs (the path locates the problem in a request or a broker's
// catalogue); Sentence is for people.
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = fe.Field + ": " + rawMessage(fe)
	}
	return strings.Join(parts, "; ")
}

// Sentence says every problem in words, naming each field as people call
// it (message.Field), without paths.
func (e *ValidationError) Sentence() string {
	parts := make([]string, len(e.Errors))
	for i, fe := range e.Errors {
		parts[i] = FieldMessage(fe)
	}
	return strings.Join(parts, " ")
}

// rawMessage is a field error without its value (which may be a
// credential or a URL that carries one): "required", with the reason when
// there is one, or what is wrong.
func rawMessage(e *field.Error) string {
	if e.Type == field.ErrorTypeRequired {
		if e.Detail != "" {
			return "required: " + e.Detail
		}
		return "required"
	}
	if e.Detail != "" {
		return e.Detail
	}
	return e.Type.String()
}

// FieldMessage is a field error as a sentence for people, naming the
// field in words (message.Field) and leaving its value out: "The Secret
// name is required." A detail that is a sentence already is kept whole.
func FieldMessage(e *field.Error) string {
	if e.Type == field.ErrorTypeRequired {
		if e.Detail != "" {
			return strings.TrimSuffix(message.Required(e.Field), ".") + ": " + strings.TrimSuffix(e.Detail, ".") + "."
		}
		return message.Required(e.Field)
	}
	d := rawMessage(e)
	if isSentence(d) {
		return d
	}
	return message.Capitalise(message.Field(e.Field)) + ": " + strings.TrimSuffix(d, ".") + "."
}

// isSentence tells whether a detail is worded as a sentence already: a
// capital first letter and a full stop.
func isSentence(s string) bool {
	return s != "" && unicode.IsUpper([]rune(s)[0]) && strings.HasSuffix(s, ".")
}

// invalid is a ValidationError of errs, or nil when there are none.
func invalid(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: errs}
}

// bad is a field error that says what is wrong and leaves the value out.
func bad(p *field.Path, detail string) *field.Error {
	return field.Invalid(p, field.OmitValueType{}, detail)
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

// validateName checks a Kubernetes object name (a DNS-1123 subdomain),
// saying in words what a name may be rather than the regular expression.
func validateName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return field.ErrorList{bad(p, message.BadName(p.String(), name, false))}
	}
	return nil
}

// validateParametersFrom checks an instance's or binding's
// spec.parametersFrom: each names a Secret of the object's namespace and a
// key of it, as Service Catalog required. Without the check, a missing or
// malformed reference was accepted and only failed when the engine read the
// Secret, retrying a read that could never succeed.
func validateParametersFrom(from []ParametersFrom) field.ErrorList {
	var errs field.ErrorList
	for i, f := range from {
		p := field.NewPath("spec", "parametersFrom").Index(i).Child("secretKeyRef")
		if f.SecretKeyRef == nil {
			errs = append(errs, field.Required(p, "name a key of a Secret in the object's namespace"))
			continue
		}
		errs = append(errs, validateName(p.Child("name"), f.SecretKeyRef.Name)...)
		errs = append(errs, validateSecretKey(p.Child("key"), f.SecretKeyRef.Key)...)
	}
	return errs
}

// validateExternalID checks an instance's or binding's spec.externalID,
// the OSB id the engine sends its broker; empty means one is generated.
func validateExternalID(id string) field.ErrorList {
	if id == "" {
		return nil
	}
	if p := osb.IDProblem(id); p != "" {
		return field.ErrorList{bad(field.NewPath("spec", "externalID"), p)}
	}
	return nil
}

// validateNamespace checks a namespace name (a DNS-1123 label).
func validateNamespace(p *field.Path, ns string) field.ErrorList {
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return field.ErrorList{bad(p, message.BadName(p.String(), ns, true))}
	}
	return nil
}
