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

// Metadata reads the class's metadata; a field of another type than the
// conventions' is left empty, the others are read all the same.
func (s *ServiceClassSpec) Metadata() ServiceMetadata {
	m := metaFields(s.ExternalMetadata)
	return ServiceMetadata{
		DisplayName: metaString(m["displayName"]), ImageURL: strings.TrimSpace(metaString(m["imageUrl"])),
		LongDescription: metaString(m["longDescription"]), ProviderDisplayName: metaString(m["providerDisplayName"]),
		DocumentationURL: strings.TrimSpace(metaString(m["documentationUrl"])), SupportURL: strings.TrimSpace(metaString(m["supportUrl"])),
	}
}

// Metadata reads the plan's metadata; bullets that are not strings and
// costs that are not of the conventions' shape are left out.
func (s *ServicePlanSpec) Metadata() PlanMetadata {
	m := metaFields(s.ExternalMetadata)
	out := PlanMetadata{DisplayName: metaString(m["displayName"])}
	var bullets, costs []json.RawMessage
	_ = json.Unmarshal(m["bullets"], &bullets)
	_ = json.Unmarshal(m["costs"], &costs)
	for _, b := range bullets {
		if v := metaString(b); v != "" {
			out.Bullets = append(out.Bullets, v)
		}
	}
	for _, c := range costs {
		var cost PlanCost
		if json.Unmarshal(c, &cost) == nil && len(cost.Amount) > 0 {
			out.Costs = append(out.Costs, cost)
		}
	}
	return out
}

// metaFields are the fields of a metadata object; none when it is no
// object.
func metaFields(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// metaString is a JSON string's value, or "" for any other JSON.
func metaString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
