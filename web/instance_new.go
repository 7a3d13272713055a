package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

// paramsPrefix is where plan parameters sit among an instance's fields,
// as the catalog names them in its errors.
const paramsPrefix = "spec.parameters"

type instanceForm struct {
	Plan      *catalog.ServicePlan
	Class     *catalog.ServiceClass
	Name      string
	Namespace string
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
	plan, class, err := s.planAndClass(c, c.QueryParam("plan"))
	if err != nil {
		return err
	}
	fields, err := form.Fields(plan.Spec.InstanceCreateParameterSchema, paramsPrefix, nil, nil)
	if err != nil {
		return err
	}
	f := instanceForm{Plan: plan, Class: class, Namespace: catalog.DefaultNamespace, Fields: fields}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		f.Namespaces, f.Namespace = sess.Namespaces, sess.Namespaces[0]
	}
	return s.page(c, http.StatusOK, "instance_new", "New "+class.Spec.ExternalName+" instance", "instances", f)
}

func (s *Server) planAndClass(c echo.Context, id string) (*catalog.ServicePlan, *catalog.ServiceClass, error) {
	if id == "" {
		return nil, nil, echo.NewHTTPError(http.StatusBadRequest, "plan: required; choose a plan in the marketplace")
	}
	plan, err := s.store.GetPlan(c.Request().Context(), id)
	if err != nil {
		return nil, nil, err
	}
	class, err := s.store.GetClass(c.Request().Context(), plan.Spec.ClusterServiceClassRef.Name)
	if err != nil {
		return nil, nil, err
	}
	return plan, class, nil
}

// instanceCreate reads the generated form into an instance and asks the
// catalog to record it; every problem, the form's and the catalog's, is
// shown next to its field.
func (s *Server) instanceCreate(c echo.Context) error {
	posted, _ := c.FormParams()
	problems := inputProblems(c)
	if problems["plan"] != "" {
		return echo.NewHTTPError(http.StatusBadRequest, "plan: "+problems["plan"])
	}
	plan, class, err := s.planAndClass(c, posted.Get("plan"))
	if err != nil {
		return err
	}
	f := instanceForm{Plan: plan, Class: class, Name: strings.TrimSpace(posted.Get("name")),
		Namespace: strings.TrimSpace(posted.Get("namespace")), Errors: map[string]string{}}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		f.Namespaces = sess.Namespaces
	}
	for k, v := range problems {
		f.Errors[k] = v
	}
	if msg := namespaceProblem(c, f.Namespace); msg != "" && f.Errors["namespace"] == "" {
		f.Errors["namespace"] = msg
	}
	if len(f.Errors) == 0 {
		params, perrs, err := form.Parse(plan.Spec.InstanceCreateParameterSchema, paramsPrefix, posted)
		if err != nil {
			return err
		}
		for _, e := range perrs {
			f.Errors[e.Field] = e.Message
		}
		if len(perrs) == 0 {
			in := &catalog.Instance{}
			in.Name, in.Namespace = f.Name, f.Namespace
			in.Spec.ClusterServiceClassName, in.Spec.ClusterServicePlanName = class.Name, plan.Name
			if len(params) > 0 {
				in.Spec.Parameters, _ = json.Marshal(params)
			}
			created, err := s.store.CreateInstance(c.Request().Context(), in)
			switch v, ok := catalog.AsValidation(err); {
			case ok:
				for _, fe := range v.Errors {
					f.Errors[fe.Field] = catalog.FieldMessage(fe)
				}
			case err != nil:
				return err
			default:
				return redirect(c, "/instances/"+created.ID, "Instance "+created.Name+" created: the engine provisions it now.")
			}
		}
	}
	fields, err := form.Refill(plan.Spec.InstanceCreateParameterSchema, paramsPrefix, posted, f.Errors)
	if err != nil {
		return err
	}
	f.Fields = fields
	f.Other = otherErrors(f.Errors, append(form.Names(fields), "name", "namespace"))
	if problems != nil {
		// Text that cannot be stored is not shown back.
		if problems["name"] != "" {
			f.Name = ""
		}
		if problems["namespace"] != "" {
			f.Namespace = ""
		}
		blankProblems(f.Fields, problems)
	}
	return s.page(c, http.StatusBadRequest, "instance_new", "New "+class.Spec.ExternalName+" instance", "instances", f)
}
