package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/web/form"
)

// brokerInputs are the registration form's inputs.
var brokerInputs = []string{"name", "namespace", "url", "auth", "username", "password", "token"}

// brokerCreate registers a broker with its URL and credentials, then
// fetches its catalogue and says how that went: a broker that cannot be
// reached is registered all the same (its status says why, and the
// relister tries again), but the page says so rather than "registered".
// A broker registered in a namespace (a ServiceBroker) offers its
// services to that namespace only.
func (s *Server) brokerCreate(c echo.Context) error {
	p := s.posted(c)
	f := brokerForm{Name: p.Value("name"), Namespace: p.Value("namespace"), URL: p.Value("url"), Username: p.Value("username"), Auth: p.Value("auth")}
	switch f.Auth {
	case "basic", "bearer", "none":
	case "":
		f.Auth = "none"
	default:
		// Read as none, it registered the broker without the credentials
		// posted beside it.
		p.Add("auth", "must be basic, bearer or none")
		f.Auth = "none"
	}
	if _, bad := p.Problems["namespace"]; f.Namespace == "" && !bad {
		// The cluster's broker: refused outright to a limited session,
		// whose form does not offer it.
		if msg := brokerRefusal(c, ""); msg != "" {
			return s.renderError(c, http.StatusForbidden, msg)
		}
	}
	if p.OK() {
		if msg := brokerRefusal(c, f.Namespace); msg != "" {
			p.Add("namespace", msg)
		}
	}
	var created *catalog.Broker
	if p.OK() {
		b := &catalog.Broker{}
		b.Name, b.Namespace, b.Spec.URL = f.Name, f.Namespace, f.URL
		var err error
		created, err = s.store.CreateBroker(c.Request().Context(), b, brokerAuth(f.Auth, f.Username, p))
		if !p.Absorb(err, brokerField) && err != nil {
			return err
		}
	}
	if !p.OK() {
		f.Errors, f.Other = p.Problems, p.Other(brokerInputs...)
		return s.renderBrokers(c, http.StatusBadRequest, f)
	}
	return redirectFlash(c, "/brokers", s.firstFetch(c, created))
}

// brokerAuth is the credentials the form chose.
func brokerAuth(kind, username string, p *form.Posted) *catalog.BrokerAuth {
	switch kind {
	case "basic":
		return &catalog.BrokerAuth{Basic: &catalog.BasicAuth{Username: username, Password: p.Secret("password")}}
	case "bearer":
		return &catalog.BrokerAuth{Bearer: &catalog.BearerAuth{Token: p.Secret("token")}}
	}
	return nil
}

// firstFetch fetches a new broker's catalogue and says how it went.
func (s *Server) firstFetch(c echo.Context, b *catalog.Broker) flash {
	ctx := c.Request().Context()
	where := ""
	if b.Namespace != "" {
		where = " in namespace " + b.Namespace
	}
	synced, err := s.store.Relist(ctx, b.ID)
	if err != nil {
		s.log.InfoContext(ctx, "first catalogue fetch failed", "broker", b.Name, "namespace", b.Namespace, "error", err)
		// The broker's status says why, in words, and when the relister
		// tries again.
		why := "Its status below says why."
		if synced != nil {
			if ready, ok := catalog.FindCondition(synced.Status.Conditions, catalog.ConditionReady); ok && ready.Message != "" {
				why = ready.Message
			}
		}
		return flash{Kind: "warn", Text: "Broker " + b.Name + " is registered" + where + ", but its catalogue was not fetched. " + why}
	}
	offers := plural(synced.Status.ServiceClassCount, "service") + " and " + plural(synced.Status.ServicePlanCount, "plan")
	if b.Namespace != "" {
		return flash{Text: "Broker " + b.Name + " registered" + where + ": it offers " + offers + ", there only."}
	}
	return flash{Text: "Broker " + b.Name + " registered: it offers " + offers + "."}
}

// brokerField maps a field of the catalog's errors to the form's input.
func brokerField(f string) string {
	switch {
	case f == "spec.url":
		return "url"
	case strings.HasPrefix(f, "auth.basic.username"), strings.HasPrefix(f, "spec.authInfo.basic.username"):
		return "username"
	case strings.HasPrefix(f, "auth.basic.password"):
		return "password"
	case strings.HasPrefix(f, "auth.bearer"):
		return "token"
	}
	return f // name and namespace are the form's names too
}
