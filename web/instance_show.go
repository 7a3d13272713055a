package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

type instanceView struct {
	Instance *catalog.Instance
	Plan     *catalog.ServicePlan
	Class    *catalog.ServiceClass
	Bindings []*catalog.Binding
	// Plans are the plans the instance may move to (its class's, when
	// the plan is updatable).
	Plans        []*catalog.ServicePlan
	Fields       []form.Field
	Errors       map[string]string
	Other        []string
	BindingName  string
	BindingError string
	// BindFields are the binding parameters of the plan's schema.
	BindFields []form.Field
}

// bindPrefix names binding parameters in the bind form, apart from the
// instance's own parameters on the same page.
const bindPrefix = "binding.parameters"

func (s *Server) instanceShow(c echo.Context) error {
	v, err := s.instanceView(c, c.Param("id"))
	if err != nil {
		return err
	}
	return s.page(c, http.StatusOK, "instance", v.Instance.Name, "instances", v)
}

// instanceView reads an instance the session may see with its plan, class
// and bindings, and builds its update form from its parameters and its
// bind form.
func (s *Server) instanceView(c echo.Context, id string) (*instanceView, error) {
	ctx := c.Request().Context()
	in, err := s.instance(c, id)
	if err != nil {
		return nil, err
	}
	v := &instanceView{Instance: in}
	classRef, planRef, refNS := in.Refs()
	if planRef != nil {
		if v.Plan, err = s.store.GetPlanIn(ctx, refNS, planRef.Name); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return nil, err
		}
	}
	if classRef != nil {
		if v.Class, err = s.store.GetClassIn(ctx, refNS, classRef.Name); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return nil, err
		}
	}
	if v.Bindings, err = s.store.BindingsOf(ctx, in.ID); err != nil {
		return nil, err
	}
	if v.Plan != nil && v.Class != nil {
		updatable := v.Class.Spec.PlanUpdatable
		if v.Plan.Spec.PlanUpdatable != nil {
			updatable = *v.Plan.Spec.PlanUpdatable
		}
		if updatable {
			// The first of a class's plans that the instance's namespace
			// may use, and the instance's own: a class of thousands makes
			// no page of thousands.
			l, err := s.store.ListPlans(ctx, catalog.PlanFilter{Class: v.Class.Name, VisibleIn: []string{in.Namespace}},
				catalog.ListOptions{Namespaced: refNS != "", Namespace: refNS, Limit: servicePlanLimit})
			if err != nil {
				return nil, err
			}
			v.Plans = l.Items
			if !slices.ContainsFunc(v.Plans, func(p *catalog.ServicePlan) bool { return p.ID == v.Plan.ID }) {
				v.Plans = append(v.Plans, v.Plan)
			}
		}
		values := map[string]any{}
		if len(in.Spec.Parameters) > 0 {
			_ = json.Unmarshal(in.Spec.Parameters, &values)
		}
		if v.Fields, err = form.Fields(v.Plan.Spec.InstanceUpdateParameterSchema, paramsPrefix, values, nil); err != nil {
			return nil, err
		}
		if v.BindFields, err = form.Fields(v.Plan.Spec.ServiceBindingCreateParameterSchema, bindPrefix, nil, nil); err != nil {
			return nil, err
		}
	}
	return v, nil
}
