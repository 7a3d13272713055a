package catalog

import (
	"encoding/json"
	"errors"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// validateMeta applies Kubernetes' own rules for labels and annotations
// (qualified keys, label value syntax, 256 kB of annotations in all) and
// PostgreSQL's (no NUL, valid UTF-8) to an object's metadata, whichever front
// door it came through, so that no object is stored that kubectl could not
// edit afterwards.
func validateMeta(m *Meta) field.ErrorList {
	errs := metav1validation.ValidateLabels(m.Labels, field.NewPath("labels"))
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(m.Annotations, field.NewPath("annotations"))...)
	for k, v := range m.Annotations {
		if p := pgtext.Problem(v); p != "" {
			errs = append(errs, bad(field.NewPath("annotations").Key(k), p))
		}
	}
	for i, f := range m.Finalizers {
		if p := pgtext.Problem(f); p != "" {
			errs = append(errs, bad(field.NewPath("finalizers").Index(i), p))
		}
	}
	// Extra is the Kubernetes API's (ownerReferences, generateName, …):
	// its fields are named as that API names them.
	return append(errs, storableJSON("metadata", m.Extra)...)
}

// validateStorable finds text in a spec that PostgreSQL cannot store (a NUL
// in any string, a lone surrogate escape in the parameters' raw JSON),
// whichever front door it came through: the database would refuse the
// whole write with an error that names no field.
func validateStorable(spec any) field.ErrorList {
	raw, err := json.Marshal(spec)
	if err != nil {
		return field.ErrorList{bad(field.NewPath("spec"), "cannot be encoded as JSON: "+err.Error())}
	}
	return storableJSON("spec", raw)
}

func storableJSON(prefix string, raw []byte) field.ErrorList {
	var te *pgtext.Error
	if err := pgtext.CheckJSON(prefix, raw); errors.As(err, &te) {
		// The dotted path prints as a field.Path of it would.
		return field.ErrorList{bad(field.NewPath(te.Field), te.Problem)}
	}
	return nil
}
