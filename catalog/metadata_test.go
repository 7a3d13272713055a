package catalog_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/bindery-dev/bindery/catalog"
)

// TestMetadata: the metadata fields people are shown, read from what a
// broker sent whatever its shape; a field of another type is left empty.
func TestMetadata(t *testing.T) {
	t.Parallel()
	class := catalog.ServiceClassSpec{ExternalMetadata: json.RawMessage(`{"displayName":"Cache","imageUrl":" https://x.example/i.png ",
		"longDescription":["not","a","string"],"providerDisplayName":7,"documentationUrl":"https://docs.example","supportUrl":null,"other":{}}`)}
	if got, want := class.Metadata(), (catalog.ServiceMetadata{DisplayName: "Cache", ImageURL: "https://x.example/i.png", DocumentationURL: "https://docs.example"}); got != want {
		t.Errorf("service metadata %+v, want %+v", got, want)
	}
	if got := (&catalog.ServiceClassSpec{ExternalMetadata: json.RawMessage(`"a string"`)}).Metadata(); got != (catalog.ServiceMetadata{}) {
		t.Errorf("metadata that is no object: %+v", got)
	}
	plan := catalog.ServicePlanSpec{ExternalMetadata: json.RawMessage(`{"displayName":"Small","bullets":["1 GB",2,"2 vCPU",""],
		"costs":[{"amount":{"usd":9.5},"unit":"MONTHLY"},{"amount":"free"},{"unit":"DAILY"}]}`)}
	want := catalog.PlanMetadata{DisplayName: "Small", Bullets: []string{"1 GB", "2 vCPU"},
		Costs: []catalog.PlanCost{{Amount: map[string]float64{"usd": 9.5}, Unit: "MONTHLY"}}}
	if got := plan.Metadata(); !reflect.DeepEqual(got, want) {
		t.Errorf("plan metadata %+v, want %+v", got, want)
	}
	odd := catalog.ServicePlanSpec{ExternalMetadata: json.RawMessage(`{"displayName":"Big","bullets":"one string","costs":{"usd":1}}`)}
	if got := odd.Metadata(); !reflect.DeepEqual(got, catalog.PlanMetadata{DisplayName: "Big"}) {
		t.Errorf("plan metadata of odd shapes %+v", got)
	}
}
