package osb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	v2 "sigs.k8s.io/go-open-service-broker-client/v2"
)

// maxCatalog bounds a catalogue response (100 services × 10 plans with
// schemas is about 2 MB).
const maxCatalog = 32 << 20

// Service is an OSB service offering: the client library's type, plus the
// 2.15+ fields it lacks, plus the whole object as the broker sent it.
type Service struct {
	v2.Service
	AllowContextUpdates bool   `json:"allow_context_updates,omitempty"`
	Plans               []Plan `json:"plans"`
	// Raw is the service object as sent, without its plans and with any
	// dashboard_client secret removed (it is not Bindery's to keep).
	Raw json.RawMessage `json:"-"`
}

// Plan is an OSB plan with the 2.15+ fields and its raw object.
type Plan struct {
	v2.Plan
	BindingRotatable bool            `json:"binding_rotatable,omitempty"`
	Raw              json.RawMessage `json:"-"`
}

// Catalog fetches GET /v2/catalog and checks it against the spec: required
// fields present, ids unique across the catalogue, names unique per scope,
// at least one plan per service, maintenance_info with a version. Every
// problem is reported with its path.
func (c *Client) Catalog(ctx context.Context) ([]Service, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v2/catalog", nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch catalog: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxCatalog+1))
	if err != nil {
		return nil, fmt.Errorf("fetch catalog: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, decodeError(res.StatusCode, res.Header, body)
	}
	if len(body) > maxCatalog {
		return nil, fmt.Errorf("catalog larger than %d bytes", maxCatalog)
	}
	return ParseCatalog(body)
}

// ParseCatalog decodes and checks a catalogue document.
func ParseCatalog(body []byte) ([]Service, error) {
	var doc struct {
		Services []json.RawMessage `json:"services"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("catalog is not valid JSON: %w", err)
	}
	if doc.Services == nil {
		return nil, errors.New("catalog: services: required")
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	services := make([]Service, 0, len(doc.Services))
	ids := map[string]string{}
	names := map[string]bool{}
	for i, raw := range doc.Services {
		path := fmt.Sprintf("services[%d]", i)
		var s Service
		if err := json.Unmarshal(raw, &s); err != nil {
			bad("%s: %v", path, err)
			continue
		}
		var obj map[string]json.RawMessage
		_ = json.Unmarshal(raw, &obj)
		var plansRaw []json.RawMessage
		_ = json.Unmarshal(obj["plans"], &plansRaw)
		delete(obj, "plans")
		delete(obj, "dashboard_client")
		s.Raw, _ = json.Marshal(obj)
		for name, v := range map[string]string{"id": s.ID, "name": s.Name, "description": s.Description} {
			if strings.TrimSpace(v) == "" {
				bad("%s.%s: required", path, name)
			}
		}
		longID(bad, path, s.ID)
		if prev, dup := ids[s.ID]; dup && s.ID != "" {
			bad("%s.id: %q is also the id of %s", path, s.ID, prev)
		}
		ids[s.ID] = path
		if names[s.Name] && s.Name != "" {
			bad("%s.name: %q is not unique", path, s.Name)
		}
		names[s.Name] = true
		if len(s.Plans) == 0 {
			bad("%s.plans: at least one plan is required", path)
		}
		planNames := map[string]bool{}
		for j := range s.Plans {
			p := &s.Plans[j]
			ppath := fmt.Sprintf("%s.plans[%d]", path, j)
			if j < len(plansRaw) {
				p.Raw = plansRaw[j]
			}
			for name, v := range map[string]string{"id": p.ID, "name": p.Name, "description": p.Description} {
				if strings.TrimSpace(v) == "" {
					bad("%s.%s: required", ppath, name)
				}
			}
			longID(bad, ppath, p.ID)
			if prev, dup := ids[p.ID]; dup && p.ID != "" {
				bad("%s.id: %q is also the id of %s", ppath, p.ID, prev)
			}
			ids[p.ID] = ppath
			if planNames[p.Name] && p.Name != "" {
				bad("%s.name: %q is not unique within the service", ppath, p.Name)
			}
			planNames[p.Name] = true
			if p.MaintenanceInfo != nil && p.MaintenanceInfo.Version == "" {
				bad("%s.maintenance_info.version: required", ppath)
			}
		}
		services = append(services, s)
	}
	if len(problems) > 0 {
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("and %d more", len(problems)-10))
		}
		return nil, fmt.Errorf("invalid catalog: %s", strings.Join(problems, "; "))
	}
	return services, nil
}

// decodeError reads an OSB error body.
func decodeError(status int, header http.Header, body []byte) error {
	e := &HTTPError{Status: status, RetryAfter: retryAfter(header.Get("Retry-After"))}
	var doc struct {
		Error            string `json:"error"`
		Description      string `json:"description"`
		InstanceUsable   *bool  `json:"instance_usable"`
		UpdateRepeatable *bool  `json:"update_repeatable"`
	}
	if json.Unmarshal(bytes.TrimSpace(body), &doc) == nil {
		e.Code, e.Description = doc.Error, doc.Description
		e.InstanceUsable, e.UpdateRepeatable = doc.InstanceUsable, doc.UpdateRepeatable
	}
	return e
}
