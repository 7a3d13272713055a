package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
	"github.com/bindery-dev/bindery/web/form"
)

// paramsPrefix is where plan parameters sit among an instance's fields,
// as the catalog names them in its errors.
const paramsPrefix = "spec.parameters"

type instanceForm struct {
	Plan  *catalog.ServicePlan
	Class *catalog.ServiceClass
	// Service, Icon and Row say what is being created, beside the form.
	Service, Icon string
	Row           planRow
	Name          string
	Namespace     string
	// Namespaces, for a session limited to them, are the namespaces it
	// may create in, offered as a list.
	Namespaces []string
	Fields     []form.Field
	Errors     map[string]string
	// Other are errors that belong to no field of the form.
	Other []string
}

// instanceNew shows the form to create an instance of a plan, generated
// from the plan's parameter schema.
func (s *Server) instanceNew(c echo.Context) error {
	ns, err := catalogNamespace(c)
	if err != nil {
		return err
	}
	plan, class, err := s.planAndClass(c, c.QueryParam("plan"), ns)
	if err != nil {
		return planGone(err)
	}
	fields, err := form.Fields(plan.Spec.InstanceCreateParameterSchema, paramsPrefix, nil, nil)
	if err != nil {
		return err
	}
	f := newInstanceForm(plan, class)
	f.Namespace, f.Fields = catalog.DefaultNamespace, fields
	switch sess, _ := sessionOf(c); {
	case plan.Namespace != "":
		// A namespace's own plan makes instances in its namespace only.
		f.Namespace = plan.Namespace
	case !sess.AllNamespaces():
		f.Namespaces, f.Namespace = sess.Namespaces, sess.Namespaces[0]
	}
	return s.page(c, http.StatusOK, "instance_new", "New "+classTitle(class)+" instance", "instances", f)
}

func newInstanceForm(plan *catalog.ServicePlan, class *catalog.ServiceClass) instanceForm {
	return instanceForm{Plan: plan, Class: class, Service: classTitle(class), Row: newPlanRow(class, plan),
		Icon: "/services/" + class.ID + "/icon" + scopedQuery(class.Namespace)}
}

// planAndClass reads plan id of scope ns ("" for the cluster's) and its
// class; a namespace's own plan outside the session's namespaces is not
// found.
func (s *Server) planAndClass(c echo.Context, id, ns string) (*catalog.ServicePlan, *catalog.ServiceClass, error) {
	if id == "" {
		return nil, nil, echo.NewHTTPError(http.StatusBadRequest, "Choose a plan first: the marketplace lists them on each service's page.")
	}
	plan, err := s.plan(c, ns, id)
	if err != nil {
		return nil, nil, err
	}
	class, err := s.store.GetClassIn(c.Request().Context(), plan.Namespace, plan.Spec.ClassName())
	if err != nil {
		return nil, nil, err
	}
	return plan, class, nil
}

// planGone says that the plan an instance form names is not found: the
// page's own kind (an instance) is not what is missing.
func planGone(err error) error {
	if errors.Is(err, catalog.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, message.Gone("serviceplans"))
	}
	return err
}

// postedPlan reads the plan an instance form names: one of the cluster's,
// or else one of the instance's namespace's own brokers (as Service
// Catalog resolves a namespaced class in its instance's namespace).
func (s *Server) postedPlan(c echo.Context, id, ns string) (*catalog.ServicePlan, *catalog.ServiceClass, error) {
	plan, class, err := s.planAndClass(c, id, "")
	if !errors.Is(err, catalog.ErrNotFound) {
		return plan, class, err
	}
	// Not the cluster's: the namespace must be one that can be looked in.
	if p := inputProblems(c)["namespace"]; p != "" {
		return nil, nil, echo.NewHTTPError(http.StatusBadRequest, "The namespace "+p+".")
	}
	if ns == "" {
		return nil, nil, err
	}
	if p := namespaceSyntax(ns); p != "" {
		return nil, nil, echo.NewHTTPError(http.StatusBadRequest, p)
	}
	return s.planAndClass(c, id, ns)
}

// instanceCreate reads the generated form into an instance and asks the
// catalog to record it; every problem, the form's and the catalog's, is
// shown next to its field.
func (s *Server) instanceCreate(c echo.Context) error {
	p := s.posted(c)
	if msg := p.Problems["plan"]; msg != "" {
		return echo.NewHTTPError(http.StatusBadRequest, "The plan "+msg+".")
	}
	plan, class, err := s.postedPlan(c, p.Value("plan"), p.Value("namespace"))
	if err != nil {
		return planGone(err)
	}
	f := newInstanceForm(plan, class)
	f.Name, f.Namespace = p.Value("name"), p.Value("namespace")
	if sess, _ := sessionOf(c); !sess.AllNamespaces() && plan.Namespace == "" {
		f.Namespaces = sess.Namespaces
	}
	if msg := namespaceProblem(c, f.Namespace); msg != "" {
		p.Add("namespace", msg)
	}
	params, err := p.Parameters(plan.Spec.InstanceCreateParameterSchema, paramsPrefix)
	if err != nil {
		return err
	}
	if p.OK() {
		in := &catalog.Instance{}
		in.Name, in.Namespace, in.Spec.Parameters = f.Name, f.Namespace, params
		if err := s.namePlan(c, &in.Spec, class, plan); err != nil {
			return err
		}
		created, err := s.store.CreateInstance(c.Request().Context(), in)
		if !p.Absorb(err, nil) {
			if err != nil {
				return err
			}
			return redirectFlash(c, "/instances/"+created.ID, flash{Kind: "until-ready",
				Text: "Instance " + created.Name + " created: the engine provisions it now."})
		}
	}
	if f.Fields, err = p.Fields(plan.Spec.InstanceCreateParameterSchema, paramsPrefix); err != nil {
		return err
	}
	f.Errors, f.Other = p.Problems, p.Other(append(form.Names(f.Fields), "name", "namespace")...)
	return s.page(c, http.StatusBadRequest, "instance_new", "New "+classTitle(class)+" instance", "instances", f)
}

// namePlan names class and plan in a new instance's spec. A namespace's
// own are named as Service Catalog's users name them, by their external
// names (resolved in the instance's namespace), unless another class of
// the namespace has the same external name (two of its brokers offering
// one service): then by their object names, which are the chosen plan's
// whatever else the namespace offers.
func (s *Server) namePlan(c echo.Context, spec *catalog.InstanceSpec, class *catalog.ServiceClass, plan *catalog.ServicePlan) error {
	if plan.Namespace == "" {
		spec.ClusterServiceClassName, spec.ClusterServicePlanName = class.Name, plan.Name
		return nil
	}
	same, err := s.store.ListClasses(c.Request().Context(), catalog.ClassFilter{Name: class.Spec.ExternalName},
		catalog.ListOptions{Namespaced: true, Namespace: plan.Namespace, Limit: 2})
	if err != nil {
		return err
	}
	if len(same.Items) == 1 {
		spec.ServiceClassExternalName, spec.ServicePlanExternalName = class.Spec.ExternalName, plan.Spec.ExternalName
	} else {
		spec.ServiceClassName, spec.ServicePlanName = class.Name, plan.Name
	}
	return nil
}
