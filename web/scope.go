package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/message"
)

// sessionKey is where authenticate leaves the request's session.
const sessionKey = "bindery.session"

// sessionOf is the signed-in session of the request, if any.
func sessionOf(c echo.Context) (catalog.Session, bool) {
	s, ok := c.Get(sessionKey).(catalog.Session)
	return s, ok
}

// role is the signed-in role of the request, or "".
func role(c echo.Context) string {
	s, _ := sessionOf(c)
	return s.Role
}

// allowsNamespace tells whether the request's session may see and act in
// namespace ns: a token limited to namespaces limits its sessions.
func allowsNamespace(c echo.Context, ns string) bool {
	s, ok := sessionOf(c)
	return ok && s.AllowsNamespace(ns)
}

// scoped narrows list options to the session's namespaces.
func scoped(c echo.Context, opts catalog.ListOptions) catalog.ListOptions {
	if s, ok := sessionOf(c); ok && !s.AllNamespaces() {
		opts.Namespaces = s.Namespaces
	}
	return opts
}

// errOutside is what an object of a namespace the session may not see is:
// not found, so that a limited session cannot even learn it exists.
var errOutside = fmt.Errorf("%w: outside the session's namespaces", catalog.ErrNotFound)

// instance reads an instance the session may see.
func (s *Server) instance(c echo.Context, id string) (*catalog.Instance, error) {
	in, err := s.store.GetInstance(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	if !allowsNamespace(c, in.Namespace) {
		return nil, errOutside
	}
	return in, nil
}

// binding reads a binding the session may see.
func (s *Server) binding(c echo.Context, id string) (*catalog.Binding, error) {
	b, err := s.store.GetBinding(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	if !allowsNamespace(c, b.Namespace) {
		return nil, errOutside
	}
	return b, nil
}

// namespaceProblem says why the session may not create in ns, or "".
func namespaceProblem(c echo.Context, ns string) string {
	if ns == "" {
		ns = catalog.DefaultNamespace
	}
	if allowsNamespace(c, ns) {
		return ""
	}
	sess, _ := sessionOf(c)
	return fmt.Sprintf("Your token is limited to the namespace(s) %s.", strings.Join(sess.Namespaces, ", "))
}

// catalogNamespace reads the ?namespace= of a broker's, class's or plan's
// address: "" for the cluster's, otherwise the namespace whose own it is
// (400 naming the parameter when it cannot be one).
func catalogNamespace(c echo.Context) (string, error) {
	ns := c.QueryParam("namespace")
	if ns == "" {
		return "", nil
	}
	if p := namespaceSyntax(ns); p != "" {
		return "", echo.NewHTTPError(http.StatusBadRequest, p)
	}
	return ns, nil
}

// namespaceSyntax says, in a sentence, why ns cannot name a namespace (a
// DNS-1123 label), or "".
func namespaceSyntax(ns string) string {
	if len(validation.IsDNS1123Label(ns)) == 0 {
		return ""
	}
	return message.BadName("namespace", ns, true)
}

// lookupScoped reads the broker, class or plan id of scope ns (the
// cluster's for ""). A namespace's own outside the session's namespaces is
// not found, so that a limited session cannot even learn it exists; the
// cluster's are everyone's to read.
func lookupScoped[T any](c echo.Context, ns, id string, get func(ctx context.Context, ns, id string) (T, error)) (T, error) {
	if ns != "" && !allowsNamespace(c, ns) {
		var zero T
		return zero, errOutside
	}
	return get(c.Request().Context(), ns, id)
}

// broker reads the broker the address names: its id in the path, its
// namespace in ?namespace= (none for the cluster's).
func (s *Server) broker(c echo.Context) (*catalog.Broker, error) {
	ns, err := catalogNamespace(c)
	if err != nil {
		return nil, err
	}
	return lookupScoped(c, ns, c.Param("id"), s.store.GetBrokerIn)
}

// plan reads plan id of scope ns the session may see.
func (s *Server) plan(c echo.Context, ns, id string) (*catalog.ServicePlan, error) {
	p, err := lookupScoped(c, ns, id, s.store.GetPlanIn)
	if err == nil && !visibleToSession(c, p) {
		return nil, errOutside
	}
	return p, err
}

// visibleToSession tells whether a plan is visible to one of the session's
// namespaces (a session of all namespaces sees every plan): to the others,
// a cluster plan restricted to namespaces does not exist.
func visibleToSession(c echo.Context, p *catalog.ServicePlan) bool {
	sess, _ := sessionOf(c)
	if sess.AllNamespaces() {
		return true
	}
	for _, ns := range sess.Namespaces {
		if catalog.VisibleIn(&p.Meta, ns) {
			return true
		}
	}
	return false
}

// brokerRefusal says why the session may not register, relist or
// deregister a broker of scope ns, or "": the same rule as the REST API's.
// The cluster's brokers offer their services to every namespace, so
// changing them needs a token for all namespaces; a namespace's own broker
// needs a token of its namespace. (The role, admin, is checked by the
// route.)
func brokerRefusal(c echo.Context, ns string) string {
	sess, _ := sessionOf(c)
	switch {
	case ns == "" && !sess.AllNamespaces():
		return "The cluster's brokers offer their services to every namespace: changing them needs an admin token for all namespaces; yours is limited to " +
			strings.Join(sess.Namespaces, ", ") + ". Register a broker of your namespace instead."
	case ns != "" && !sess.AllowsNamespace(ns):
		return "Your token is limited to the namespace(s) " + strings.Join(sess.Namespaces, ", ") + "."
	}
	return ""
}

// scopedQuery is the query of a broker's, class's or plan's address: its
// namespace, for a namespace's own.
func scopedQuery(ns string) string {
	if ns == "" {
		return ""
	}
	return "?namespace=" + url.QueryEscape(ns)
}

// instanceNamed sends the browser to the page of the instance a namespace
// and name say, for pages that know a binding's instance by name only.
func (s *Server) instanceNamed(c echo.Context) error {
	ns := c.Param("namespace")
	if !allowsNamespace(c, ns) {
		return errOutside
	}
	in, err := s.store.GetInstanceByName(c.Request().Context(), ns, c.Param("name"))
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/instances/"+in.ID)
}
