package broker

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/params"
	"sigs.k8s.io/yaml"
)

//go:embed catalog.yaml
var defaultCatalog []byte

// Service is an OSB Service Offering object, plus the name of the driver
// that provisions it (not sent to platforms).
type Service struct {
	ID                   string          `json:"id"`
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Tags                 []string        `json:"tags,omitempty"`
	Requires             []string        `json:"requires,omitempty"`
	Bindable             bool            `json:"bindable"`
	InstancesRetrievable bool            `json:"instances_retrievable,omitempty"`
	BindingsRetrievable  bool            `json:"bindings_retrievable,omitempty"`
	AllowContextUpdates  bool            `json:"allow_context_updates,omitempty"`
	Metadata             json.RawMessage `json:"metadata,omitempty"`
	DashboardClient      json.RawMessage `json:"dashboard_client,omitempty"`
	PlanUpdateable       bool            `json:"plan_updateable,omitempty"`
	Plans                []*Plan         `json:"plans"`

	// Driver names the Driver that does the work for this service.
	Driver string `json:"-"`
}

// Plan is an OSB Service Plan object, plus Bindery's own settings for it.
type Plan struct {
	ID                     string           `json:"id"`
	Name                   string           `json:"name"`
	Description            string           `json:"description"`
	Metadata               json.RawMessage  `json:"metadata,omitempty"`
	Free                   *bool            `json:"free,omitempty"`
	Bindable               *bool            `json:"bindable,omitempty"`
	BindingRotatable       bool             `json:"binding_rotatable,omitempty"`
	PlanUpdateable         *bool            `json:"plan_updateable,omitempty"`
	Schemas                *Schemas         `json:"schemas,omitempty"`
	MaximumPollingDuration *int             `json:"maximum_polling_duration,omitempty"`
	MaintenanceInfo        *MaintenanceInfo `json:"maintenance_info,omitempty"`

	// AsyncRequired makes every operation on the plan asynchronous: requests
	// without accepts_incomplete=true get 422 AsyncRequired.
	AsyncRequired bool `json:"-"`
	// RequiresApp makes bind requests without an app_guid fail with 422
	// RequiresApp.
	RequiresApp bool `json:"-"`
	// Config is handed to the service's driver as it is.
	Config json.RawMessage `json:"-"`

	service *Service
	create  *params.Schema // instance create parameters
	update  *params.Schema // instance update parameters
	bind    *params.Schema // binding create parameters
}

// Schemas is the OSB Schemas object.
type Schemas struct {
	ServiceInstance *struct {
		Create *InputParameters `json:"create,omitempty"`
		Update *InputParameters `json:"update,omitempty"`
	} `json:"service_instance,omitempty"`
	ServiceBinding *struct {
		Create *InputParameters `json:"create,omitempty"`
	} `json:"service_binding,omitempty"`
}

// InputParameters is the OSB Input Parameters Schema object.
type InputParameters struct {
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// MaintenanceInfo is the OSB Maintenance Info object.
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// IsBindable reports whether instances of the plan can be bound.
func (p *Plan) IsBindable() bool {
	if p.Bindable != nil {
		return *p.Bindable
	}
	return p.service.Bindable
}

// IsUpdateable reports whether instances of the plan may change plans.
func (p *Plan) IsUpdateable() bool {
	if p.PlanUpdateable != nil {
		return *p.PlanUpdateable
	}
	return p.service.PlanUpdateable
}

// Service returns the service the plan belongs to.
func (p *Plan) Service() *Service { return p.service }

// maintenanceVersion is the plan's maintenance_info.version, or "".
func (p *Plan) maintenanceVersion() string {
	if p.MaintenanceInfo == nil {
		return ""
	}
	return p.MaintenanceInfo.Version
}

// Catalog is the validated catalogue a broker serves.
type Catalog struct {
	Services []*Service

	plans    map[string]*Plan
	services map[string]*Service
	body     []byte // the /v2/catalog response, encoded once
	etag     string
}

// Body returns the encoded GET /v2/catalog response and its ETag.
func (c *Catalog) Body() ([]byte, string) { return c.body, c.etag }

// Plan finds a plan by id.
func (c *Catalog) Plan(id string) (*Plan, bool) {
	p, ok := c.plans[id]
	return p, ok
}

// Service finds a service by id.
func (c *Catalog) ServiceByID(id string) (*Service, bool) {
	s, ok := c.services[id]
	return s, ok
}

// catalogFile is the YAML form of the catalogue: OSB fields plus the
// `driver` of each service and the `bindery` settings of each plan.
type catalogFile struct {
	Services []fileService `json:"services"`
}

type fileService struct {
	Service
	Driver string     `json:"driver"`
	Plans  []filePlan `json:"plans"`
}

type filePlan struct {
	Plan
	Bindery struct {
		AsyncRequired bool            `json:"async_required"`
		RequiresApp   bool            `json:"requires_app"`
		Config        json.RawMessage `json:"config"`
	} `json:"bindery"`
}

// DefaultCatalog returns the embedded default catalogue.
func DefaultCatalog() (*Catalog, error) { return ParseCatalog(defaultCatalog) }

// LoadCatalog reads a catalogue file; an empty path means the default.
func LoadCatalog(path string) (*Catalog, error) {
	if path == "" {
		return DefaultCatalog()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	c, err := ParseCatalog(b)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	return c, nil
}

// ParseCatalog decodes and validates a YAML (or JSON) catalogue. Every
// problem is reported, each with its path: ids and names unique, required
// fields present, maintenance versions given, schemas compiled.
func ParseCatalog(doc []byte) (*Catalog, error) {
	jsonDoc, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonDoc))
	dec.DisallowUnknownFields()
	var f catalogFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	k := &catalogCheck{c: &Catalog{plans: map[string]*Plan{}, services: map[string]*Service{}}, ids: map[string]string{}, names: map[string]bool{}}
	if len(f.Services) == 0 {
		k.bad("services", "at least one service is required")
	}
	for i := range f.Services {
		k.service(fmt.Sprintf("services[%d]", i), &f.Services[i])
	}
	c, errs := k.c, k.errs
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	body, err := json.Marshal(struct {
		Services []*Service `json:"services"`
	}{c.Services})
	if err != nil {
		return nil, err
	}
	c.body = body
	sum := sha256.Sum256(body)
	c.etag = `"` + hex.EncodeToString(sum[:16]) + `"`
	return c, nil
}

// catalogCheck builds a Catalog from its file, collecting every problem
// with its path.
type catalogCheck struct {
	c     *Catalog
	errs  []error
	ids   map[string]string // id -> path of what has it
	names map[string]bool   // service names
}

func (k *catalogCheck) bad(path, format string, args ...any) {
	k.errs = append(k.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// id checks a service's or plan's id: bounded, and unique in the
// catalogue.
func (k *catalogCheck) id(path, id string) {
	if id == "" {
		return
	}
	if len(id) > osb.MaxIDLength {
		k.bad(path+".id", "%s", osb.IDProblem(id))
	}
	if prev, dup := k.ids[id]; dup {
		k.bad(path+".id", "%q is also the id of %s", id, prev)
	}
	k.ids[id] = path
}

func (k *catalogCheck) service(path string, fs *fileService) {
	s := new(Service)
	*s = fs.Service
	s.Driver = fs.Driver
	s.Plans = nil
	required(k.bad, path, map[string]string{"id": s.ID, "name": s.Name, "description": s.Description, "driver": s.Driver})
	k.id(path, s.ID)
	if k.names[s.Name] && s.Name != "" {
		k.bad(path+".name", "%q is not unique among services", s.Name)
	}
	k.names[s.Name] = true
	if len(fs.Plans) == 0 {
		k.bad(path+".plans", "at least one plan is required")
	}
	planNames := map[string]bool{}
	for j := range fs.Plans {
		p := k.plan(fmt.Sprintf("%s.plans[%d]", path, j), &fs.Plans[j], s)
		if planNames[p.Name] && p.Name != "" {
			k.bad(fmt.Sprintf("%s.plans[%d].name", path, j), "%q is not unique within the service", p.Name)
		}
		planNames[p.Name] = true
		s.Plans = append(s.Plans, p)
		k.c.plans[p.ID] = p
	}
	k.c.Services = append(k.c.Services, s)
	k.c.services[s.ID] = s
}

func (k *catalogCheck) plan(path string, fp *filePlan, s *Service) *Plan {
	p := new(Plan)
	*p = fp.Plan
	p.AsyncRequired = fp.Bindery.AsyncRequired
	p.RequiresApp = fp.Bindery.RequiresApp
	p.Config = fp.Bindery.Config
	p.service = s
	required(k.bad, path, map[string]string{"id": p.ID, "name": p.Name, "description": p.Description})
	k.id(path, p.ID)
	if p.MaintenanceInfo != nil && p.MaintenanceInfo.Version == "" {
		k.bad(path+".maintenance_info.version", "required when maintenance_info is given")
	}
	if p.MaximumPollingDuration != nil && *p.MaximumPollingDuration <= 0 {
		k.bad(path+".maximum_polling_duration", "must be a positive number of seconds")
	}
	if err := p.compileSchemas(path + ".schemas"); err != nil {
		k.errs = append(k.errs, err)
	}
	return p
}

func required(bad func(path, format string, args ...any), path string, fields map[string]string) {
	for _, name := range []string{"id", "name", "description", "driver"} {
		if v, ok := fields[name]; ok && strings.TrimSpace(v) == "" {
			bad(path+"."+name, "required")
		}
	}
}

// compileSchemas compiles the plan's parameter schemas. OSB requires a
// $schema key, no external references and at most 64 kB per schema.
func (p *Plan) compileSchemas(path string) error {
	if p.Schemas == nil {
		return nil
	}
	var errs []error
	compile := func(where string, in *InputParameters) *params.Schema {
		if in == nil || len(in.Parameters) == 0 {
			return nil
		}
		s, err := params.Compile(in.Parameters, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s.parameters: %w", path, where, err))
		}
		return s
	}
	if si := p.Schemas.ServiceInstance; si != nil {
		p.create = compile("service_instance.create", si.Create)
		p.update = compile("service_instance.update", si.Update)
	}
	if sb := p.Schemas.ServiceBinding; sb != nil {
		p.bind = compile("service_binding.create", sb.Create)
	}
	return errors.Join(errs...)
}
