package web

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// offeringName is how a page names an instance's service and plan: by
// the broker's display names, never by object names (often OSB ids).
type offeringName struct {
	Service, Plan string
	// Href is the service's page, when the instance has resolved it.
	Href string
}

// offeringNames names the services and plans of instances, by instance
// id: those they resolved to, each read once, or while unresolved the
// names they ask for.
func (s *Server) offeringNames(c echo.Context, ins []*catalog.Instance) (map[string]offeringName, error) {
	ctx := c.Request().Context()
	classes := map[[2]string]*catalog.ServiceClass{}
	plans := map[[2]string]*catalog.ServicePlan{}
	out := make(map[string]offeringName, len(ins))
	for _, in := range ins {
		classRef, planRef, ns := in.Refs()
		var n offeringName
		if classRef != nil {
			k := [2]string{ns, classRef.Name}
			cl, seen := classes[k]
			if !seen {
				var err error
				if cl, err = s.store.GetClassIn(ctx, ns, classRef.Name); err != nil && !errors.Is(err, catalog.ErrNotFound) {
					return nil, err
				}
				classes[k] = cl
			}
			if cl != nil {
				n.Service, n.Href = classTitle(cl), "/services/"+cl.ID+scopedQuery(cl.Namespace)
			}
		}
		if planRef != nil {
			k := [2]string{ns, planRef.Name}
			p, seen := plans[k]
			if !seen {
				var err error
				if p, err = s.store.GetPlanIn(ctx, ns, planRef.Name); err != nil && !errors.Is(err, catalog.ErrNotFound) {
					return nil, err
				}
				plans[k] = p
			}
			if p != nil {
				n.Plan = planTitle(p)
			}
		}
		if n.Service == "" {
			n.Service = firstOf(in.Spec.ClusterServiceClassExternalName, in.Spec.ServiceClassExternalName, in.Spec.ClusterServiceClassName,
				in.Spec.ServiceClassName, in.Spec.ClusterServiceClassExternalID, in.Spec.ServiceClassExternalID)
		}
		if n.Plan == "" {
			n.Plan = firstOf(in.Spec.ClusterServicePlanExternalName, in.Spec.ServicePlanExternalName, in.Spec.ClusterServicePlanName,
				in.Spec.ServicePlanName, in.Spec.ClusterServicePlanExternalID, in.Spec.ServicePlanExternalID)
		}
		out[in.ID] = n
	}
	return out, nil
}

// classTitle is a service's display name, or its name.
func classTitle(c *catalog.ServiceClass) string {
	return displayName(c.Spec.Metadata().DisplayName, c.Spec.ExternalName)
}

// planTitle is a plan's display name, or its name.
func planTitle(p *catalog.ServicePlan) string {
	return displayName(p.Spec.Metadata().DisplayName, p.Spec.ExternalName)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
