package catalog

import (
	"strings"
	"testing"

	"github.com/bindery-dev/bindery/internal/osb"
)

// TestPlanOf: a catalogue entry's plan becomes a ServicePlan: free unless
// the broker says otherwise, schemas and maintenance info carried over,
// a name from its id (hashed when the id is no Kubernetes name).
func TestPlanOf(t *testing.T) {
	t.Parallel()
	b := &Broker{Meta: Meta{Name: "acme"}}
	class := &ServiceClass{Meta: Meta{Name: "db"}}
	parse := func(t *testing.T, doc string) osb.Plan {
		t.Helper()
		svcs, err := osb.ParseCatalog([]byte(`{"services":[{"id":"db","name":"db","description":"d","bindable":true,"plans":[` + doc + `]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return svcs[0].Plans[0]
	}
	for _, tc := range []struct {
		name, doc string
		check     func(t *testing.T, p *ServicePlan)
	}{
		{"free by default", `{"id":"small","name":"small","description":"d"}`, func(t *testing.T, p *ServicePlan) {
			if !p.Spec.Free || p.Name != "small" || p.Spec.ClusterServiceClassRef.Name != "db" || p.Spec.ClusterServiceBrokerName != "acme" {
				t.Errorf("%+v", p.Spec)
			}
		}},
		{"paid, with schemas and maintenance info", `{"id":"big","name":"big","description":"d","free":false,
			"maintenance_info":{"version":"1.2.3"},
			"schemas":{"service_instance":{"create":{"parameters":{"type":"object"}},"update":{"parameters":{"type":"object","properties":{}}}},
				"service_binding":{"create":{"parameters":{"type":"object","required":["x"]}}}}}`, func(t *testing.T, p *ServicePlan) {
			s := p.Spec
			if s.Free || s.MaintenanceInfo == nil || s.MaintenanceInfo.Version != "1.2.3" ||
				string(s.InstanceCreateParameterSchema) != `{"type":"object"}` ||
				!strings.Contains(string(s.InstanceUpdateParameterSchema), "properties") ||
				!strings.Contains(string(s.ServiceBindingCreateParameterSchema), "required") {
				t.Errorf("%+v", s)
			}
		}},
		{"an id that is no name", `{"id":"Big_Plan","name":"big","description":"d"}`, func(t *testing.T, p *ServicePlan) {
			if !strings.HasPrefix(p.Name, "h-") || p.Spec.ExternalID != "Big_Plan" {
				t.Errorf("name %q for id %q", p.Name, p.Spec.ExternalID)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, planOf(b, class, parse(t, tc.doc)))
		})
	}
}

// TestClassOf: a catalogue entry's service becomes a ServiceClass.
func TestClassOf(t *testing.T) {
	t.Parallel()
	svcs, err := osb.ParseCatalog([]byte(`{"services":[{"id":"db","name":"postgres","description":"d","bindable":true,
		"plan_updateable":true,"tags":["sql"],"metadata":{"displayName":"PostgreSQL"},
		"plans":[{"id":"small","name":"small","description":"d"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := classOf(&Broker{Meta: Meta{Name: "acme"}}, svcs[0])
	s := c.Spec
	if c.Name != "db" || s.ExternalName != "postgres" || !s.Bindable || !s.PlanUpdatable || len(s.Tags) != 1 ||
		!strings.Contains(string(s.ExternalMetadata), "PostgreSQL") || s.ClusterServiceBrokerName != "acme" {
		t.Errorf("%+v", c)
	}
}
