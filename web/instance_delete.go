package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// deleteView is the confirmation page of a deletion: what goes, what
// happens, and the name to type.
type deleteView struct {
	Kind, Name, Namespace string
	// Action is where the form posts; Back where Cancel goes.
	Action, Back string
	// Consequence says what the deletion does, Blockers what is in its
	// way (bindings of an instance).
	Consequence string
	Blockers    []string
	Verb        string
	Error       string
}

func (s *Server) confirmPage(c echo.Context, status int, v deleteView) error {
	if v.Verb == "" {
		v.Verb = "Delete"
	}
	return s.page(c, status, "delete", v.Verb+" "+v.Kind+" "+v.Name, "", v)
}

// confirmed checks the typed name of a deletion: it must be the object's
// name, exactly. It says what is wrong, or "".
func confirmed(c echo.Context, name string) string {
	if p := inputProblems(c)["confirm"]; p != "" {
		return p
	}
	switch typed := c.FormValue("confirm"); {
	case typed == "":
		return "required: type the name to confirm"
	case typed != name:
		return "does not match: type " + name + " exactly"
	}
	return ""
}

func (s *Server) instanceDeleteView(c echo.Context) (deleteView, error) {
	in, err := s.instance(c, c.Param("id"))
	if err != nil {
		return deleteView{}, err
	}
	v := deleteView{Kind: "instance", Name: in.Name, Namespace: in.Namespace,
		Action: "/instances/" + in.ID + "/delete", Back: "/instances/" + in.ID,
		Consequence: "The broker deprovisions the instance: its data is gone for good."}
	bindings, err := s.store.BindingsOf(c.Request().Context(), in.ID)
	if err != nil {
		return v, err
	}
	for _, b := range bindings {
		if b.DeletionTimestamp == nil {
			v.Blockers = append(v.Blockers, b.Name)
		}
	}
	return v, nil
}

// instanceDeleteConfirm asks to confirm an instance's deletion.
func (s *Server) instanceDeleteConfirm(c echo.Context) error {
	v, err := s.instanceDeleteView(c)
	if err != nil {
		return err
	}
	return s.confirmPage(c, http.StatusOK, v)
}

// instanceDelete marks an instance for deletion once its name was typed;
// the engine deprovisions it, and the page shows it going.
func (s *Server) instanceDelete(c echo.Context) error {
	v, err := s.instanceDeleteView(c)
	if err != nil {
		return err
	}
	if v.Error = confirmed(c, v.Name); v.Error != "" {
		return s.confirmPage(c, http.StatusBadRequest, v)
	}
	in, err := s.store.DeleteInstance(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return redirect(c, "/instances", "Instance "+in.Name+" is being deleted.")
}
