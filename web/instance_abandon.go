package web

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// The abandon of an object whose deletion is stuck (its broker refuses
// or never answers): a button on the page of an object being deleted, a
// confirmation that says what stays behind at the broker, and the
// catalog's one abandon operation.

func (s *Server) instanceAbandonView(c echo.Context) (deleteView, error) {
	in, err := s.instance(c, c.Param("id"))
	if err != nil {
		return deleteView{}, err
	}
	return deleteView{Kind: "instance", Name: in.Name, Namespace: in.Namespace, Verb: "Abandon",
		Action: "/instances/" + in.ID + "/abandon", Back: "/instances/" + in.ID,
		Consequence: "Bindery removes the instance at once, without asking its broker again. " + catalog.InstanceLeftBehind}, nil
}

// instanceAbandonConfirm asks to confirm an instance's abandon.
func (s *Server) instanceAbandonConfirm(c echo.Context) error {
	v, err := s.instanceAbandonView(c)
	if err != nil {
		return err
	}
	return s.confirmPage(c, http.StatusOK, v)
}

// instanceAbandon abandons an instance once its name was typed.
func (s *Server) instanceAbandon(c echo.Context) error {
	v, err := s.instanceAbandonView(c)
	if err != nil {
		return err
	}
	if v.Error = confirmed(c, v.Name); v.Error != "" {
		return s.confirmPage(c, http.StatusBadRequest, v)
	}
	in, err := s.store.AbandonInstance(c.Request().Context(), c.Param("id"), requester(c))
	if err != nil {
		return err
	}
	return redirect(c, "/instances", "Instance "+in.Name+" was abandoned; what the broker made for it stays there.")
}

func (s *Server) bindingAbandonView(c echo.Context) (deleteView, error) {
	b, err := s.binding(c, c.Param("id"))
	if err != nil {
		return deleteView{}, err
	}
	return deleteView{Kind: "binding", Name: b.Name, Namespace: b.Namespace, Verb: "Abandon",
		Action: "/bindings/" + b.ID + "/abandon", Back: "/bindings/" + b.ID,
		Consequence: "Bindery removes the binding at once, without asking its broker again. " + catalog.BindingLeftBehind}, nil
}

// bindingAbandonConfirm asks to confirm a binding's abandon.
func (s *Server) bindingAbandonConfirm(c echo.Context) error {
	v, err := s.bindingAbandonView(c)
	if err != nil {
		return err
	}
	return s.confirmPage(c, http.StatusOK, v)
}

// bindingAbandon abandons a binding once its name was typed.
func (s *Server) bindingAbandon(c echo.Context) error {
	v, err := s.bindingAbandonView(c)
	if err != nil {
		return err
	}
	if v.Error = confirmed(c, v.Name); v.Error != "" {
		return s.confirmPage(c, http.StatusBadRequest, v)
	}
	b, err := s.store.AbandonBinding(c.Request().Context(), c.Param("id"), requester(c))
	if err != nil {
		return err
	}
	return redirect(c, "/bindings", "Binding "+b.Name+" was abandoned; its credentials stay valid at the broker.")
}

// requester names who is signed in, for the history: the session's token.
func requester(c echo.Context) string {
	sess, _ := sessionOf(c)
	if sess.TokenName != "" {
		return fmt.Sprintf("%q in the web UI (API token %s, role %s)", sess.TokenName, sess.TokenID, sess.Role)
	}
	return fmt.Sprintf("the web UI (API token %s, role %s)", sess.TokenID, sess.Role)
}
