package osbtest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
)

// Service is an OSB Service Offering object, with every field of the 2.17
// catalog (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#service-offering-object).
type Service struct {
	ID                   string           `json:"id"`
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	Tags                 []string         `json:"tags,omitempty"`
	Requires             []string         `json:"requires,omitempty"`
	Bindable             bool             `json:"bindable"`
	InstancesRetrievable bool             `json:"instances_retrievable,omitempty"`
	BindingsRetrievable  bool             `json:"bindings_retrievable,omitempty"`
	AllowContextUpdates  bool             `json:"allow_context_updates,omitempty"`
	Metadata             map[string]any   `json:"metadata,omitempty"`
	DashboardClient      *DashboardClient `json:"dashboard_client,omitempty"`
	PlanUpdateable       bool             `json:"plan_updateable,omitempty"`
	Plans                []Plan           `json:"plans"`
}

// DashboardClient is the Cloud Foundry dashboard_client extension of a
// Service Offering.
type DashboardClient struct {
	ID          string `json:"id"`
	Secret      string `json:"secret"`
	RedirectURI string `json:"redirect_uri,omitempty"`
}

// Plan is an OSB Service Plan object
// (https://github.com/openservicebrokerapi/servicebroker/blob/v2.17/spec.md#service-plan-object),
// plus how the fake broker behaves for it. Free, Bindable and PlanUpdateable
// are pointers because absent differs from false (write new(false)).
type Plan struct {
	ID                     string           `json:"id"`
	Name                   string           `json:"name"`
	Description            string           `json:"description"`
	Metadata               map[string]any   `json:"metadata,omitempty"`
	Free                   *bool            `json:"free,omitempty"`
	Bindable               *bool            `json:"bindable,omitempty"`
	BindingRotatable       bool             `json:"binding_rotatable,omitempty"`
	PlanUpdateable         *bool            `json:"plan_updateable,omitempty"`
	Schemas                *Schemas         `json:"schemas,omitempty"`
	MaximumPollingDuration int              `json:"maximum_polling_duration,omitempty"`
	MaintenanceInfo        *MaintenanceInfo `json:"maintenance_info,omitempty"`

	// Async makes provision, update, deprovision, bind and unbind on the
	// plan answer 202 when the request has accepts_incomplete=true (and
	// synchronously otherwise).
	Async bool `json:"-"`
	// AsyncRequired is Async, and requests without accepts_incomplete=true
	// get 422 AsyncRequired.
	AsyncRequired bool `json:"-"`
}

// Schemas is the OSB Schemas object of a plan.
type Schemas struct {
	ServiceInstance *ServiceInstanceSchema `json:"service_instance,omitempty"`
	ServiceBinding  *ServiceBindingSchema  `json:"service_binding,omitempty"`
}

// ServiceInstanceSchema holds the parameter schemas for creating and
// updating an instance.
type ServiceInstanceSchema struct {
	Create *InputParameters `json:"create,omitempty"`
	Update *InputParameters `json:"update,omitempty"`
}

// ServiceBindingSchema holds the parameter schema for creating a binding.
type ServiceBindingSchema struct {
	Create *InputParameters `json:"create,omitempty"`
}

// InputParameters is the OSB Input Parameters Schema object: a JSON schema.
type InputParameters struct {
	Parameters map[string]any `json:"parameters,omitempty"`
}

// MaintenanceInfo is the OSB Maintenance Info object.
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// The service and plans of DefaultCatalog, for Broker.IDs.
const (
	DefaultService = "fake-service"
	// PlanSync answers synchronously (unless WithAsync).
	PlanSync = "sync"
	// PlanAsync answers 202 to requests with accepts_incomplete=true.
	PlanAsync = "async"
	// PlanAsyncOnly answers 422 AsyncRequired without accepts_incomplete=true.
	PlanAsyncOnly = "async-only"
	// PlanFixed has plan_updateable false: instances cannot leave it.
	PlanFixed = "fixed"
)

// DefaultCatalog is the catalog a Broker starts with: one bindable,
// retrievable, plan-updateable service (DefaultService) with the plans
// PlanSync, PlanAsync, PlanAsyncOnly and PlanFixed. Ids are new random GUIDs
// on every call, as ids must be unique across brokers.
func DefaultCatalog() []Service {
	plan := func(name, description string) Plan {
		return Plan{ID: newGUID(), Name: name, Description: description}
	}
	sync := plan(PlanSync, "Answers synchronously.")
	async := plan(PlanAsync, "Answers asynchronously when the platform allows it.")
	async.Async = true
	asyncOnly := plan(PlanAsyncOnly, "Answers only asynchronously.")
	asyncOnly.AsyncRequired = true
	fixed := plan(PlanFixed, "Instances cannot change to another plan.")
	fixed.PlanUpdateable = new(false)
	return []Service{{
		ID:                   newGUID(),
		Name:                 DefaultService,
		Description:          "A fake service for tests.",
		Bindable:             true,
		InstancesRetrievable: true,
		BindingsRetrievable:  true,
		PlanUpdateable:       true,
		Plans:                []Plan{sync, async, asyncOnly, fixed},
	}}
}

// GenerateCatalog returns a valid catalog of the given size, for benchmarks
// (100 x 10 is the figure Bindery's catalog must sync in under a second).
// Ids are random GUIDs; names are CLI-friendly ("fake-service-7", "plan-3");
// every plan has instance and binding parameter schemas and every optional
// field is filled in.
func GenerateCatalog(services, plansPerService int) []Service {
	out := make([]Service, services)
	for i := range out {
		n := i + 1
		s := Service{
			ID:                   newGUID(),
			Name:                 fmt.Sprintf("fake-service-%d", n),
			Description:          fmt.Sprintf("Generated fake service number %d.", n),
			Tags:                 []string{"fake", fmt.Sprintf("group-%d", n%10)},
			Bindable:             true,
			InstancesRetrievable: true,
			BindingsRetrievable:  true,
			AllowContextUpdates:  true,
			PlanUpdateable:       true,
			Metadata: map[string]any{
				"displayName": fmt.Sprintf("Fake Service %d", n),
				"provider":    map[string]any{"name": "osbtest"},
				"listing":     map[string]any{"blurb": "A generated service for benchmarks."},
			},
			Plans: make([]Plan, plansPerService),
		}
		for j := range s.Plans {
			m := j + 1
			s.Plans[j] = Plan{
				ID:          newGUID(),
				Name:        fmt.Sprintf("plan-%d", m),
				Description: fmt.Sprintf("Generated plan %d of %s.", m, s.Name),
				Metadata: map[string]any{
					"bullets": []any{fmt.Sprintf("%d GB storage", m*10), fmt.Sprintf("%d connections", m*20)},
					"costs":   []any{map[string]any{"amount": map[string]any{"usd": float64(m)}, "unit": "MONTHLY"}},
				},
				Free:                   new(m == 1),
				Bindable:               new(true),
				BindingRotatable:       true,
				PlanUpdateable:         new(true),
				Schemas:                generatedSchemas(),
				MaximumPollingDuration: 3600,
				MaintenanceInfo:        &MaintenanceInfo{Version: "1.0.0", Description: "Initial version."},
			}
		}
		out[i] = s
	}
	return out
}

// generatedSchemas are the parameter schemas of a generated plan: a fresh
// copy each time, so no two plans share maps.
func generatedSchemas() *Schemas {
	params := func() *InputParameters {
		return &InputParameters{Parameters: map[string]any{
			"$schema": "http://json-schema.org/draft-04/schema#",
			"type":    "object",
			"properties": map[string]any{
				"size":   map[string]any{"type": "integer", "minimum": 1, "maximum": 100},
				"region": map[string]any{"type": "string", "enum": []any{"eu", "us", "ap"}},
			},
		}}
	}
	return &Schemas{
		ServiceInstance: &ServiceInstanceSchema{Create: params(), Update: params()},
		ServiceBinding:  &ServiceBindingSchema{Create: params()},
	}
}

// newGUID returns a random (version 4) UUID.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// planRef is a plan of the current catalog with its service.
type planRef struct {
	service *Service
	plan    *Plan
}

// bindable is the plan's bindable, or else its service's.
func (p *planRef) bindable() bool {
	if p.plan.Bindable != nil {
		return *p.plan.Bindable
	}
	return p.service.Bindable
}

// updateable is the plan's plan_updateable, or else its service's.
func (p *planRef) updateable() bool {
	if p.plan.PlanUpdateable != nil {
		return *p.plan.PlanUpdateable
	}
	return p.service.PlanUpdateable
}

// SetCatalog replaces the catalog the broker serves from now on. It is
// served as given, even if invalid, so tests can also check how platforms
// treat bad catalogs. Instances of plans that disappear keep working. The
// maps in services must not be changed afterwards.
func (b *Broker) SetCatalog(services []Service) {
	b.t.Helper()
	services = slices.Clone(services)
	for i := range services {
		services[i].Plans = slices.Clone(services[i].Plans)
	}
	if services == nil {
		services = []Service{}
	}
	body, err := json.Marshal(map[string]any{"services": services})
	if err != nil {
		b.t.Fatalf("osbtest: encode catalog: %v", err)
	}
	plans := map[string]*planRef{}
	for i := range services {
		s := &services[i]
		for j := range s.Plans {
			plans[s.Plans[j].ID] = &planRef{service: s, plan: &s.Plans[j]}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.catalog, b.catalogBody, b.plans = services, body, plans
}

// Catalog returns the services the broker serves now.
func (b *Broker) Catalog() []Service {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.catalog)
}

// IDs returns the ids of the named service and plan of the current catalog,
// failing the test when there is no such plan. Call it from the test's
// goroutine.
func (b *Broker) IDs(service, plan string) (serviceID, planID string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.catalog {
		if s.Name != service {
			continue
		}
		for _, p := range s.Plans {
			if p.Name == plan {
				return s.ID, p.ID
			}
		}
	}
	b.t.Fatalf("osbtest: no plan %q in service %q", plan, service)
	return "", ""
}
