package restapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// tokenKey is where require leaves the request's token in the context.
const tokenKey = "bindery.token"

// tokenOf is the token of an authenticated request.
func tokenOf(c echo.Context) *catalog.Token {
	t, _ := c.Get(tokenKey).(*catalog.Token)
	return t
}

// allowNamespace refuses (403) a write into a namespace the token is not
// limited to.
func allowNamespace(c echo.Context, ns string) error {
	if ns == "" {
		ns = catalog.DefaultNamespace
	}
	if t := tokenOf(c); t != nil && !t.AllowsNamespace(ns) {
		return apiError(http.StatusForbidden, "forbidden", "This token is limited to namespace(s) %s, not %q.", strings.Join(t.Namespaces, ", "), ns)
	}
	return nil
}

// clusterWide refuses (403) tokens limited to namespaces: the tokens
// themselves belong to no namespace.
func clusterWide(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := allowCluster(c); err != nil {
			return err
		}
		return next(c)
	}
}

// allowCluster refuses (403) a token limited to namespaces: what belongs to
// no namespace (the cluster's brokers, tokens) is changed by tokens for all
// namespaces only.
func allowCluster(c echo.Context) error {
	if t := tokenOf(c); t != nil && !t.AllNamespaces() {
		return apiError(http.StatusForbidden, "forbidden", "This needs a token for all namespaces; this one is limited to %s.", strings.Join(t.Namespaces, ", "))
	}
	return nil
}

// allowScope refuses (403) a change of a broker of scope ns ("" for the
// cluster's) that the token may not make: a cluster broker needs a token
// for all namespaces, a namespaced one a token of its namespace.
func allowScope(c echo.Context, ns string) error {
	if ns == "" {
		return allowCluster(c)
	}
	return allowNamespace(c, ns)
}

// scopeCatalog sets a list of brokers, classes or plans to the cluster's,
// or, when ?namespace= names one, to that namespace's, which must be one of
// the token's (403 otherwise, as for instances).
func scopeCatalog(c echo.Context, opts *catalog.ListOptions) error {
	if opts.Namespace == "" {
		return nil
	}
	opts.Namespaced = true
	return allowNamespace(c, opts.Namespace)
}

// scopeList narrows a list to the token's namespaces: a namespace asked for
// must be one of them, and none asked for means all of them.
func scopeList(c echo.Context, opts *catalog.ListOptions) error {
	t := tokenOf(c)
	if t == nil || t.AllNamespaces() {
		return nil
	}
	if opts.Namespace != "" {
		if !t.AllowsNamespace(opts.Namespace) {
			return apiError(http.StatusForbidden, "forbidden", "This token is limited to namespace(s) %s, not %q.", strings.Join(t.Namespaces, ", "), opts.Namespace)
		}
		return nil
	}
	opts.Namespaces = t.Namespaces
	return nil
}

// lookup reads the object the path's id names: by id (a UUID), or by name
// in ?namespace= (default "default"). An object outside the token's
// namespaces is not found, so a limited token cannot even learn it exists.
func lookup[T any](c echo.Context, byID func(string) (T, error), byName func(ns, name string) (T, error), nsOf func(T) string) (T, error) {
	id := c.Param("id")
	var obj T
	var err error
	if catalog.IsID(id) {
		obj, err = byID(id)
	} else {
		ns := c.QueryParam("namespace")
		if ns == "" {
			ns = catalog.DefaultNamespace
		}
		obj, err = byName(ns, id)
	}
	if err != nil {
		return obj, err
	}
	if t := tokenOf(c); t != nil && !t.AllowsNamespace(nsOf(obj)) {
		var zero T
		return zero, fmt.Errorf("%w: outside the token's namespaces", catalog.ErrNotFound)
	}
	return obj, nil
}

func (s *Server) instance(c echo.Context) (*catalog.Instance, error) {
	return lookup(c, func(id string) (*catalog.Instance, error) { return s.store.GetInstance(ctx(c), id) },
		func(ns, name string) (*catalog.Instance, error) { return s.store.GetInstanceByName(ctx(c), ns, name) },
		func(in *catalog.Instance) string { return in.Namespace })
}

func (s *Server) binding(c echo.Context) (*catalog.Binding, error) {
	return lookup(c, func(id string) (*catalog.Binding, error) { return s.store.GetBinding(ctx(c), id) },
		func(ns, name string) (*catalog.Binding, error) { return s.store.GetBindingByName(ctx(c), ns, name) },
		func(b *catalog.Binding) string { return b.Namespace })
}

// lookupScoped reads the broker, class or plan the path's id (an id or a
// name) names among the cluster's, or among the namespace's that
// ?namespace= names. A namespaced one outside the token's namespaces is not
// found, so a limited token cannot even learn it exists; the cluster's are
// everyone's to read.
func lookupScoped[T any](c echo.Context, get func(ns, idOrName string) (T, error), nsOf func(T) string) (T, error) {
	var zero T
	ns := c.QueryParam("namespace")
	t := tokenOf(c)
	if ns != "" && t != nil && !t.AllowsNamespace(ns) {
		return zero, fmt.Errorf("%w: outside the token's namespaces", catalog.ErrNotFound)
	}
	obj, err := get(ns, c.Param("id"))
	if err != nil {
		return zero, err
	}
	if got := nsOf(obj); got != "" && t != nil && !t.AllowsNamespace(got) {
		return zero, fmt.Errorf("%w: outside the token's namespaces", catalog.ErrNotFound)
	}
	return obj, nil
}

func (s *Server) broker(c echo.Context) (*catalog.Broker, error) {
	return lookupScoped(c, func(ns, id string) (*catalog.Broker, error) { return s.store.GetBrokerIn(ctx(c), ns, id) },
		func(b *catalog.Broker) string { return b.Namespace })
}

func (s *Server) class(c echo.Context) (*catalog.ServiceClass, error) {
	return lookupScoped(c, func(ns, id string) (*catalog.ServiceClass, error) { return s.store.GetClassIn(ctx(c), ns, id) },
		func(cl *catalog.ServiceClass) string { return cl.Namespace })
}

func (s *Server) plan(c echo.Context) (*catalog.ServicePlan, error) {
	p, err := lookupScoped(c, func(ns, id string) (*catalog.ServicePlan, error) { return s.store.GetPlanIn(ctx(c), ns, id) },
		func(p *catalog.ServicePlan) string { return p.Namespace })
	if err == nil && hiddenFrom(c, p) {
		return nil, fmt.Errorf("%w: hidden from the token's namespaces", catalog.ErrNotFound)
	}
	return p, err
}
