package catalog

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
)

// validateSecretTransforms checks a binding's spec.secretTransforms as
// Service Catalog did: each entry is one transform, its keys are Secret
// keys, an added key has one value, a JSONPath parses and a Secret is
// named. Without the check, a bad transform was found only once the broker
// had bound, when the engine built the Secret, leaving credentials at the
// broker that no Secret could hold.
func validateSecretTransforms(ts []SecretTransform, namespace string) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		p := field.NewPath("spec", "secretTransforms").Index(i)
		if given(t.RenameKey != nil, t.AddKey != nil, t.AddKeysFrom != nil, t.RemoveKey != nil) != 1 {
			errs = append(errs, bad(p, "must hold exactly one of renameKey, addKey, addKeysFrom and removeKey"))
			continue
		}
		switch {
		case t.RenameKey != nil:
			errs = append(errs, validateSecretKey(p.Child("renameKey", "from"), t.RenameKey.From)...)
			errs = append(errs, validateSecretKey(p.Child("renameKey", "to"), t.RenameKey.To)...)
		case t.AddKey != nil:
			errs = append(errs, validateAddKey(p.Child("addKey"), t.AddKey)...)
		case t.AddKeysFrom != nil:
			if t.AddKeysFrom.SecretRef == nil {
				errs = append(errs, field.Required(p.Child("addKeysFrom", "secretRef"), "name a Secret in the binding's namespace"))
			} else {
				errs = append(errs, validateName(p.Child("addKeysFrom", "secretRef", "name"), t.AddKeysFrom.SecretRef.Name)...)
				errs = append(errs, ownNamespace(p.Child("addKeysFrom", "secretRef", "namespace"), t.AddKeysFrom.SecretRef.Namespace, namespace, "Secret")...)
			}
		case t.RemoveKey != nil:
			errs = append(errs, validateSecretKey(p.Child("removeKey", "key"), t.RemoveKey.Key)...)
		}
	}
	return errs
}

func validateAddKey(p *field.Path, a *AddKeyTransform) field.ErrorList {
	errs := validateSecretKey(p.Child("key"), a.Key)
	if given(a.Value != nil, a.StringValue != "", a.JSONPathExpression != "") > 1 {
		errs = append(errs, bad(p, "must hold only one of value, stringValue and jsonPathExpression"))
	}
	if a.JSONPathExpression != "" {
		if err := jsonpath.New("addKey").Parse(a.JSONPathExpression); err != nil {
			errs = append(errs, bad(p.Child("jsonPathExpression"), "is not a JSONPath expression: "+err.Error()))
		}
	}
	return errs
}

// given counts the members of a one-of that are set.
func given(set ...bool) int {
	n := 0
	for _, ok := range set {
		if ok {
			n++
		}
	}
	return n
}

// validateSecretKey checks a key of a Secret's data.
func validateSecretKey(p *field.Path, key string) field.ErrorList {
	switch {
	case key == "":
		return field.ErrorList{field.Required(p, "")}
	case len(validation.IsConfigMapKey(key)) > 0:
		return field.ErrorList{bad(p, "must be a Secret key: letters, digits, '-', '_' and '.', at most 253 characters")}
	}
	return nil
}

// ownNamespace refuses a reference's namespace (at path) other than the
// referring object's own, ns: a binding binds an instance of its own
// namespace and reads Secrets of its own namespace only. One that names
// another namespace would be recorded as if it referred there, while it
// refers to the object of that name in its own.
func ownNamespace(path *field.Path, ref, ns, what string) field.ErrorList {
	if ref == "" || ref == ns {
		return nil
	}
	return field.ErrorList{bad(path, fmt.Sprintf("must be the binding's own namespace %q, or left out: a binding refers to the %s of that name in its own namespace only", ns, what))}
}
