package instance

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/bindery-dev/bindery/cli/internal/api"
)

// TestRowsDecodeAsRow checks that the table of a list, decoded into row,
// says what Row says of the whole object, in every state.
func TestRowsDecodeAsRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		object string
		status string
	}{
		{`{"status":{"currentOperation":"Provision","conditions":[{"type":"Ready","status":"False","reason":"Provisioning"}]}}`, "Provision in progress"},
		{`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"X"},{"type":"Failed","status":"True"}]}}`, "Failed"},
		{`{"deletionTimestamp":"2026-01-01T00:00:00Z","status":{"conditions":[{"type":"Ready","status":"True","reason":"ProvisionedSuccessfully"}]}}`, "Deleting"},
		{`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"ProvisionedSuccessfully"}]}}`, "Ready"},
		{`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`, "Pending"},
		{`{}`, "Pending"},
	} {
		for _, spec := range []string{
			`{"clusterServiceClassExternalName":"postgresql","clusterServicePlanExternalName":"small"}`,
			`{"serviceClassExternalName":"postgresql","servicePlanExternalName":"small"}`, // a namespace's own class
		} {
			checkRow(t, `{"namespace":"team","name":"db","spec":`+spec+`}`, tc.object, tc.status)
		}
	}
}

// checkRow checks Row and row of the instance raw with object's fields
// (status, deletionTimestamp) added.
func checkRow(t *testing.T, raw, object, status string) {
	t.Helper()
	if object != "{}" {
		raw = raw[:len(raw)-1] + "," + object[1:]
	}
	var whole api.Object
	if err := json.Unmarshal([]byte(raw), &whole); err != nil {
		t.Fatal(err)
	}
	var r row
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	want := []string{"team", "db", "postgresql", "small", status}
	if got := Kind.Row(whole); !slices.Equal(got, want) {
		t.Errorf("Row(%s) = %q, want %q", raw, got, want)
	}
	if got := r.cells(); !slices.Equal(got, want) {
		t.Errorf("row of %s = %q, want %q", raw, got, want)
	}
}
