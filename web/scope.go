package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
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
	return fmt.Sprintf("your token is limited to the namespace(s) %s", strings.Join(sess.Namespaces, ", "))
}

// clusterWide refuses sessions limited to namespaces: brokers (and the
// classes and plans they bring) belong to no namespace, so changing them
// needs a token for all namespaces.
func (s *Server) clusterWide(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if sess, ok := sessionOf(c); ok && !sess.AllNamespaces() {
			return s.renderError(c, http.StatusForbidden, "Brokers belong to every namespace: this needs an admin token for all namespaces; yours is limited to "+
				strings.Join(sess.Namespaces, ", ")+".")
		}
		return next(c)
	}
}
