package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerDeleteView reads the broker to deregister: one the session may
// change (404 for another namespace's, 403 for the cluster's to a session
// limited to namespaces).
func (s *Server) brokerDeleteView(c echo.Context) (deleteView, *catalog.Broker, error) {
	b, err := s.broker(c)
	if err != nil {
		return deleteView{}, nil, err
	}
	if msg := brokerRefusal(c, b.Namespace); msg != "" {
		return deleteView{}, nil, echo.NewHTTPError(http.StatusForbidden, msg)
	}
	v := deleteView{Kind: "broker", Name: b.Name, Namespace: b.Namespace, Verb: "Deregister",
		Action: "/brokers/" + b.ID + "/delete" + scopedQuery(b.Namespace), Back: "/brokers",
		Consequence: "Its services and plans leave the marketplace. The catalog refuses while instances of its plans exist."}
	if b.Namespace != "" {
		v.Consequence = "Its services and plans leave namespace " + b.Namespace + "'s marketplace. The catalog refuses while instances of its plans exist."
	}
	return v, b, nil
}

// brokerDeleteConfirm asks to confirm a broker's deregistration.
func (s *Server) brokerDeleteConfirm(c echo.Context) error {
	v, _, err := s.brokerDeleteView(c)
	if err != nil {
		return err
	}
	return s.confirmPage(c, http.StatusOK, v)
}

// brokerDelete deregisters a broker once its name was typed; the catalog
// refuses while instances of its plans exist.
func (s *Server) brokerDelete(c echo.Context) error {
	v, b, err := s.brokerDeleteView(c)
	if err != nil {
		return err
	}
	if v.Error = confirmed(c, v.Name); v.Error != "" {
		return s.confirmPage(c, http.StatusBadRequest, v)
	}
	if err := s.store.DeleteBroker(c.Request().Context(), b.ID); err != nil {
		return err
	}
	return redirect(c, "/brokers", "Broker "+v.Name+" deregistered.")
}
