package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerCreate registers a broker with its URL and credentials, then
// fetches its catalogue; a broker that cannot be reached is registered
// all the same, and its status says why. A broker registered in a
// namespace (a ServiceBroker) offers its services to that namespace only.
func (s *Server) brokerCreate(c echo.Context) error {
	ctx := c.Request().Context()
	f := brokerForm{
		Name: strings.TrimSpace(c.FormValue("name")), Namespace: strings.TrimSpace(c.FormValue("namespace")),
		URL: strings.TrimSpace(c.FormValue("url")), Username: strings.TrimSpace(c.FormValue("username")), Auth: c.FormValue("auth"),
	}
	problems := inputProblems(c)
	if f.Namespace == "" && problems["namespace"] == "" {
		// The cluster's broker: refused outright to a limited session,
		// whose form does not offer it.
		if msg := brokerRefusal(c, ""); msg != "" {
			return s.renderError(c, http.StatusForbidden, msg)
		}
	}
	if problems != nil {
		f.Errors = map[string]string{}
		for k, p := range problems {
			switch k {
			case "name", "namespace", "url", "username", "password", "token":
				f.Errors[k] = p
			default:
				f.Other = append(f.Other, printable(k)+": "+p)
			}
		}
		// Text that cannot be stored is not shown back.
		if problems["name"] != "" {
			f.Name = ""
		}
		if problems["namespace"] != "" {
			f.Namespace = ""
		}
		if problems["url"] != "" {
			f.URL = ""
		}
		if problems["username"] != "" {
			f.Username = ""
		}
		if f.Auth != "basic" && f.Auth != "bearer" {
			f.Auth = "none"
		}
		return s.renderBrokers(c, http.StatusBadRequest, f)
	}
	if msg := brokerRefusal(c, f.Namespace); msg != "" {
		f.Errors = map[string]string{"namespace": msg}
		return s.renderBrokers(c, http.StatusBadRequest, f)
	}
	b := &catalog.Broker{}
	b.Name, b.Namespace, b.Spec.URL = f.Name, f.Namespace, f.URL
	var auth *catalog.BrokerAuth
	switch f.Auth {
	case "basic":
		auth = &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: f.Username, Password: c.FormValue("password")}}
	case "bearer":
		auth = &catalog.BrokerAuth{Bearer: &catalog.BearerAuth{Token: c.FormValue("token")}}
	default:
		f.Auth = "none"
	}
	created, err := s.store.CreateBroker(ctx, b, auth)
	if v, ok := catalog.AsValidation(err); ok {
		f.Errors = map[string]string{}
		for _, fe := range v.Errors {
			name := brokerField(fe.Field)
			if name == "" {
				f.Other = append(f.Other, catalog.FieldMessage(fe))
				continue
			}
			f.Errors[name] = catalog.FieldMessage(fe)
		}
		return s.renderBrokers(c, http.StatusBadRequest, f)
	}
	if err != nil {
		return err
	}
	return redirect(c, "/brokers", s.registered(c, created))
}

// registered fetches a new broker's catalogue and says how it went: a
// broker whose fetch failed is registered all the same, and retried with
// backoff, which the notice says in its status's words.
func (s *Server) registered(c echo.Context, created *catalog.Broker) string {
	ctx := c.Request().Context()
	if fetched, err := s.store.Relist(ctx, created.ID); err != nil {
		s.log.InfoContext(ctx, "first catalogue fetch failed", "broker", created.Name, "error", err)
		if fetched != nil {
			ready, _ := catalog.FindCondition(fetched.Status.Conditions, catalog.ConditionReady)
			return "Broker " + created.Name + " is registered, but its catalogue was not fetched. " + ready.Message
		}
	}
	if created.Namespace != "" {
		return "Broker " + created.Name + " registered in namespace " + created.Namespace + ": its services are offered there only."
	}
	return "Broker " + created.Name + " registered."
}

// brokerField maps a field of the catalog's errors to the form's.
func brokerField(f string) string {
	switch {
	case f == "name":
		return "name"
	case f == "namespace":
		return "namespace"
	case f == "spec.url":
		return "url"
	case strings.HasPrefix(f, "auth.basic.username"), strings.HasPrefix(f, "spec.authInfo.basic.username"):
		return "username"
	case strings.HasPrefix(f, "auth.basic.password"):
		return "password"
	case strings.HasPrefix(f, "auth.bearer"):
		return "token"
	}
	return ""
}
