// Package bindingdata shapes a binding's credentials into what a workload
// reads: one entry per key, the binding's secretTransforms applied, and the
// servicebinding.io `type` and `provider` entries. The engine writes the
// entries into the binding's Secret; the Kubernetes API's credentials
// subresource hands them to the CSI driver, which writes them as files. Both
// call this package, so an application sees the same keys either way.
package bindingdata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"k8s.io/client-go/util/jsonpath"

	"github.com/bindery-dev/bindery/catalog"
)

// Data turns credentials into entries: strings as they are, other values
// as JSON, then the binding's transforms in order. addKeysFrom reads other
// Secrets (of the binding's namespace) through from; with from nil it is
// refused, naming the transform.
func Data(creds map[string]any, transforms []catalog.SecretTransform, from func(name string) (map[string][]byte, error)) (map[string][]byte, error) {
	data := make(map[string][]byte, len(creds))
	for k, v := range creds {
		if s, ok := v.(string); ok {
			data[k] = []byte(s)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("credential %q: %w", k, err)
		}
		data[k] = raw
	}
	for i, t := range transforms {
		switch {
		case t.RenameKey != nil:
			if v, ok := data[t.RenameKey.From]; ok {
				delete(data, t.RenameKey.From)
				data[t.RenameKey.To] = v
			}
		case t.AddKey != nil:
			switch {
			case t.AddKey.JSONPathExpression != "":
				v, err := evalJSONPath(creds, t.AddKey.JSONPathExpression)
				if err != nil {
					return nil, fmt.Errorf("spec.secretTransforms[%d].addKey.jsonPathExpression: %w", i, err)
				}
				data[t.AddKey.Key] = v
			case t.AddKey.StringValue != "":
				data[t.AddKey.Key] = []byte(t.AddKey.StringValue)
			default:
				data[t.AddKey.Key] = t.AddKey.Value
			}
		case t.AddKeysFrom != nil && t.AddKeysFrom.SecretRef != nil:
			if from == nil {
				return nil, fmt.Errorf("spec.secretTransforms[%d].addKeysFrom: needs a Kubernetes cluster", i)
			}
			more, err := from(t.AddKeysFrom.SecretRef.Name)
			if err != nil {
				return nil, fmt.Errorf("spec.secretTransforms[%d].addKeysFrom: %w", i, err)
			}
			maps.Copy(data, more)
		case t.RemoveKey != nil:
			delete(data, t.RemoveKey.Key)
		}
	}
	return data, nil
}

// evalJSONPath evaluates expr over the credentials. Its failure names the
// expression's fault, never a credential: jsonpath's own errors of
// evaluation quote the values they met, and the failure goes into the
// binding's status and Events, which people read who may not read the
// Secret.
func evalJSONPath(creds map[string]any, expr string) ([]byte, error) {
	jp := jsonpath.New("addKey")
	if err := jp.Parse(expr); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := jp.Execute(&buf, creds); err != nil {
		return nil, errNotApplicable
	}
	return buf.Bytes(), nil
}

// errNotApplicable is the failure of an expression evaluated over the
// credentials.
var errNotApplicable = errors.New("does not apply to the credentials the broker returned (a key it names is missing, or holds another kind of value)")

// WithTypeProvider returns a copy of data with the servicebinding.io
// entries `type` (Type of the class) and `provider` (the broker's name)
// added where the credentials and transforms did not set them.
func WithTypeProvider(data map[string][]byte, class *catalog.ServiceClass, provider string) map[string][]byte {
	data = maps.Clone(data)
	if data == nil {
		data = map[string][]byte{}
	}
	if len(data["type"]) == 0 {
		data["type"] = []byte(Type(class))
	}
	if len(data["provider"]) == 0 {
		data["provider"] = []byte(provider)
	}
	return data
}

// Type is the servicebinding.io type of a class: its first tag that names
// a well-known type, else its first tag, else its name.
func Type(class *catalog.ServiceClass) string {
	known := []string{"postgresql", "mysql", "mongodb", "redis", "rabbitmq", "kafka", "elasticsearch", "sqlserver", "oracle", "db2", "ldap", "mariadb", "cassandra", "couchbase"}
	for _, t := range class.Spec.Tags {
		for _, k := range known {
			if strings.EqualFold(t, k) {
				return k
			}
		}
	}
	if len(class.Spec.Tags) > 0 {
		return strings.ToLower(class.Spec.Tags[0])
	}
	return strings.ToLower(class.Spec.ExternalName)
}
