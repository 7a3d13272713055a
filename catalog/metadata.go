package catalog

import (
	"encoding/json"
	"strings"
)

// ServiceMetadata is what a broker says of a service for people, in the
// fields of its catalogue's free-form metadata that platforms agree on
// (Cloud Foundry's catalog metadata conventions, which OSB brokers follow).
type ServiceMetadata struct {
	DisplayName         string `json:"displayName"`
	ImageURL            string `json:"imageUrl"`
	LongDescription     string `json:"longDescription"`
	ProviderDisplayName string `json:"providerDisplayName"`
	DocumentationURL    string `json:"documentationUrl"`
	SupportURL          string `json:"supportUrl"`
}

// PlanMetadata is what a broker says of a plan for people.
type PlanMetadata struct {
	DisplayName string     `json:"displayName"`
	Bullets     []string   `json:"bullets"`
	Costs       []PlanCost `json:"costs"`
}

// PlanCost is one price of a plan: amounts by currency code, per unit
// ("MONTHLY", "per 1000 requests").
type PlanCost struct {
	Amount map[string]float64 `json:"amount"`
	Unit   string             `json:"unit"`
}

// Metadata reads the class's metadata; fields of another type than the
// conventions' are left empty.
func (s *ServiceClassSpec) Metadata() ServiceMetadata {
	var m struct {
		DisplayName, ImageURL, LongDescription, ProviderDisplayName, DocumentationURL, SupportURL json.RawMessage
	}
	if len(s.ExternalMetadata) == 0 || json.Unmarshal(s.ExternalMetadata, &m) != nil {
		return ServiceMetadata{}
	}
	return ServiceMetadata{
		DisplayName: metaString(m.DisplayName), ImageURL: strings.TrimSpace(metaString(m.ImageURL)),
		LongDescription: metaString(m.LongDescription), ProviderDisplayName: metaString(m.ProviderDisplayName),
		DocumentationURL: strings.TrimSpace(metaString(m.DocumentationURL)), SupportURL: strings.TrimSpace(metaString(m.SupportURL)),
	}
}

// Metadata reads the plan's metadata; bullets that are not strings and
// costs that are not of the conventions' shape are left out.
func (s *ServicePlanSpec) Metadata() PlanMetadata {
	var m struct {
		DisplayName json.RawMessage
		Bullets     []json.RawMessage
		Costs       []json.RawMessage
	}
	if len(s.ExternalMetadata) == 0 || json.Unmarshal(s.ExternalMetadata, &m) != nil {
		return PlanMetadata{}
	}
	out := PlanMetadata{DisplayName: metaString(m.DisplayName)}
	for _, b := range m.Bullets {
		if v := metaString(b); v != "" {
			out.Bullets = append(out.Bullets, v)
		}
	}
	for _, c := range m.Costs {
		var cost PlanCost
		if json.Unmarshal(c, &cost) == nil && len(cost.Amount) > 0 {
			out.Costs = append(out.Costs, cost)
		}
	}
	return out
}

// metaString is a JSON string's value, or "" for any other JSON.
func metaString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
