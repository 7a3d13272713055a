package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

// bindingCreate binds an instance the session may see: a binding named in
// the form, in the instance's namespace, with the parameters of the form
// generated from the plan's binding schema. Problems show on the
// instance's page, next to their fields.
func (s *Server) bindingCreate(c echo.Context) error {
	in, err := s.instance(c, c.Param("id"))
	if err != nil {
		return err
	}
	schema, err := s.bindingSchema(c, in)
	if err != nil {
		return err
	}
	p := s.posted(c)
	b := &catalog.Binding{}
	b.Name, b.Namespace = p.Value("name"), in.Namespace
	b.Spec.InstanceRef = catalog.ObjectRef{Name: in.Name}
	if b.Spec.Parameters, err = p.Parameters(schema, bindPrefix); err != nil {
		return err
	}
	if p.OK() {
		created, err := s.store.CreateBinding(c.Request().Context(), b)
		if !p.Absorb(err, func(f string) string { return strings.Replace(f, paramsPrefix, bindPrefix, 1) }) {
			if err != nil {
				return err
			}
			return redirectFlash(c, "/bindings/"+created.ID, flash{Kind: "until-ready",
				Text: "Binding " + created.Name + " created: the engine asks the broker for credentials now."})
		}
	}
	view, err := s.instanceView(c, in.ID)
	if err != nil {
		return err
	}
	view.BindingName = b.Name
	if view.BindFields, err = p.Fields(schema, bindPrefix); err != nil {
		return err
	}
	// The name's problem goes next to it; any other not next to a
	// parameter's input, after it.
	view.BindingError = strings.Join(append(nonEmpty(p.Problems["name"]), p.Other(append(form.Names(view.BindFields), "name")...)...), "; ")
	return s.page(c, http.StatusBadRequest, "instance", in.Name, "instances", view)
}

// bindingSchema is the binding parameters' schema of an instance's plan,
// if it has one.
func (s *Server) bindingSchema(c echo.Context, in *catalog.Instance) (json.RawMessage, error) {
	_, planRef, refNS := in.Refs()
	if planRef == nil {
		return nil, nil
	}
	plan, err := s.store.GetPlanIn(c.Request().Context(), refNS, planRef.Name)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return plan.Spec.ServiceBindingCreateParameterSchema, nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
