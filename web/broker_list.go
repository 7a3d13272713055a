package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerForm is the registration form, with what was typed (never the
// password or token) and the errors by field.
type brokerForm struct {
	Name, URL, Username, Auth string
	Errors                    map[string]string
	Other                     []string
}

type brokerListView struct {
	Brokers []*catalog.Broker
	Form    brokerForm
}

func (s *Server) brokerList(c echo.Context) error {
	return s.renderBrokers(c, http.StatusOK, brokerForm{Auth: "basic"})
}

func (s *Server) renderBrokers(c echo.Context, status int, f brokerForm) error {
	l, err := s.store.ListBrokers(c.Request().Context(), catalog.ListOptions{})
	if err != nil {
		return err
	}
	return s.page(c, status, "brokers", "Brokers", "brokers", brokerListView{Brokers: l.Items, Form: f})
}

// brokerRows renders the brokers table alone, for live updates.
func (s *Server) brokerRows(c echo.Context) (string, error) {
	l, err := s.store.ListBrokers(c.Request().Context(), catalog.ListOptions{})
	if err != nil {
		return "", err
	}
	return s.renderString(c, "brokers", "broker-rows", brokerListView{Brokers: l.Items})
}
