package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

func (s *Server) brokerDeleteView(c echo.Context) (deleteView, error) {
	b, err := s.store.GetBroker(c.Request().Context(), c.Param("id"))
	if err != nil {
		return deleteView{}, err
	}
	return deleteView{Kind: "broker", Name: b.Name, Verb: "Deregister",
		Action: "/brokers/" + b.ID + "/delete", Back: "/brokers",
		Consequence: "Its services and plans leave the marketplace. The catalog refuses while instances of its plans exist."}, nil
}

// brokerDeleteConfirm asks to confirm a broker's deregistration.
func (s *Server) brokerDeleteConfirm(c echo.Context) error {
	v, err := s.brokerDeleteView(c)
	if err != nil {
		return err
	}
	return s.confirmPage(c, http.StatusOK, v)
}

// brokerDelete deregisters a broker once its name was typed; the catalog
// refuses while instances of its plans exist.
func (s *Server) brokerDelete(c echo.Context) error {
	v, err := s.brokerDeleteView(c)
	if err != nil {
		return err
	}
	if v.Error = confirmed(c, v.Name); v.Error != "" {
		return s.confirmPage(c, http.StatusBadRequest, v)
	}
	if err := s.store.DeleteBroker(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return redirect(c, "/brokers", "Broker "+v.Name+" deregistered.")
}
