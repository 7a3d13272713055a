package broker_test

import (
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/broker"
)

// TestParseCatalogProblems: every problem of a catalogue file is
// reported at once with its path, ids over 255 bytes among them.
func TestParseCatalogProblems(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300)
	doc := `services:
  - id: ` + long + `
    name: s
    description: d
    driver: postgresql
    plans:
      - {id: p1, name: a, description: d}
      - {id: p1, name: a, description: d, maximum_polling_duration: 0}
  - {id: s2, name: s, description: "", driver: postgresql, plans: []}
`
	_, err := broker.ParseCatalog([]byte(doc))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"services[0].id: must be at most 255 bytes long, not 300",
		`services[0].plans[1].id: "p1" is also the id of services[0].plans[0]`,
		`services[0].plans[1].name: "a" is not unique within the service`,
		"services[0].plans[1].maximum_polling_duration: must be a positive number of seconds",
		`services[1].name: "s" is not unique among services`,
		"services[1].description: required",
		"services[1].plans: at least one plan is required",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if _, err := broker.DefaultCatalog(); err != nil {
		t.Errorf("the default catalogue: %v", err)
	}
}
