package bindingdata_test

import (
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/bindingdata"
)

// TestTransformFailureNamesNoCredential: an addKey expression that does
// not apply to the credentials fails naming the transform and not a
// credential's value: the failure goes into status and Events, which
// people read who may not read the Secret.
func TestTransformFailureNamesNoCredential(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	creds := map[string]any{"password": secret, "nested": map[string]any{"token": secret}}
	for _, expr := range []string{`{.password[?(@.a=="b")]}`, `{.password[0]}`, `{.nested.token[1:2]}`, `{.missing}`, `{.nested[*].x}`} {
		_, err := bindingdata.Data(creds, []catalog.SecretTransform{{AddKey: &catalog.AddKeyTransform{Key: "k", JSONPathExpression: expr}}}, nil)
		if err == nil {
			continue
		}
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "secretTransforms[0].addKey.jsonPathExpression") {
			t.Errorf("%s: %v", expr, err)
		}
	}
	if _, err := bindingdata.Data(creds, []catalog.SecretTransform{{AddKey: &catalog.AddKeyTransform{Key: "k", JSONPathExpression: `{.password[?(@.a=="b")]}`}}}, nil); err == nil {
		t.Error("a filter of a string applied")
	}
}
