package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerForm is the registration form, with what was typed (never the
// password or token) and the errors by field.
type brokerForm struct {
	Name, Namespace, URL, Username, Auth string
	// Namespaces, for a session limited to them, are the namespaces it may
	// register a broker in, offered as a list (the cluster is not one).
	Namespaces []string
	Errors     map[string]string
	Other      []string
}

type brokerListView struct {
	// Brokers are the cluster's, then those of the session's namespaces
	// by namespace and name.
	Brokers []*catalog.Broker
	Form    brokerForm
}

func (s *Server) brokerList(c echo.Context) error {
	return s.renderBrokers(c, http.StatusOK, brokerForm{Auth: "basic"})
}

func (s *Server) renderBrokers(c echo.Context, status int, f brokerForm) error {
	brokers, err := s.brokers(c)
	if err != nil {
		return err
	}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		f.Namespaces = sess.Namespaces
		if f.Namespace == "" {
			f.Namespace = sess.Namespaces[0]
		}
	}
	return s.page(c, status, "brokers", "Brokers", "brokers", brokerListView{Brokers: brokers, Form: f})
}

// brokers are the brokers the session sees: the cluster's, and the own
// brokers of its namespaces (of every namespace, for a session of all).
// The cluster brokers' counts of plans are of those the session's
// namespaces see (catalog.PlansVisibleIn).
func (s *Server) brokers(c echo.Context) ([]*catalog.Broker, error) {
	ctx := c.Request().Context()
	sess, _ := sessionOf(c)
	brokers, err := s.brokersIn(ctx, sess.Namespaces)
	if err != nil {
		return nil, err
	}
	if !sess.AllNamespaces() {
		if err := s.store.CountPlansVisibleIn(ctx, sess.Namespaces, brokers...); err != nil {
			return nil, err
		}
	}
	return brokers, nil
}

// brokersIn are the cluster's brokers, then the own brokers of namespaces
// (of every namespace when there are none).
func (s *Server) brokersIn(ctx context.Context, namespaces []string) ([]*catalog.Broker, error) {
	cluster, err := s.store.ListBrokers(ctx, catalog.ListOptions{})
	if err != nil {
		return nil, err
	}
	own, err := s.store.ListBrokers(ctx, catalog.ListOptions{Namespaced: true, Namespaces: namespaces})
	if err != nil {
		return nil, err
	}
	return append(cluster.Items, own.Items...), nil
}

// brokerRows renders the brokers table alone, for live updates.
func (s *Server) brokerRows(c echo.Context) (string, error) {
	brokers, err := s.brokers(c)
	if err != nil {
		return "", err
	}
	return s.renderString(c, "brokers", "broker-rows", brokerListView{Brokers: brokers})
}
