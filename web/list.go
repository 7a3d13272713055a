package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// Page sizes of the lists: pageSize unless ?limit= asks for another, up to
// maxPageSize.
const (
	pageSize    = 50
	maxPageSize = 500
)

// listQuery is what a list page asks for: a namespace (none: every one the
// session may see), a page size and where the page starts (a continue
// token of the catalog's).
type listQuery struct {
	Namespace string
	Limit     int
	Continue  string
}

func readListQuery(c echo.Context) (listQuery, error) {
	q, err := readPage(c)
	if err != nil {
		return q, err
	}
	q.Namespace = c.QueryParam("namespace")
	if err := checkNamespace(q.Namespace); err != nil {
		return q, err
	}
	if q.Namespace != "" && !allowsNamespace(c, q.Namespace) {
		sess, _ := sessionOf(c)
		return q, echo.NewHTTPError(http.StatusForbidden, "Your token is limited to the namespace(s) "+strings.Join(sess.Namespaces, ", ")+": choose one of them.")
	}
	return q, nil
}

// readPage reads the page a list without a namespace filter asks for:
// its size and where it starts.
func readPage(c echo.Context) (listQuery, error) {
	q := listQuery{Limit: pageSize, Continue: c.QueryParam("continue")}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageSize {
			return q, echo.NewHTTPError(http.StatusBadRequest, "The page size (limit) must be a whole number from 1 to "+strconv.Itoa(maxPageSize)+".")
		}
		q.Limit = n
	}
	return q, nil
}

// checkNamespace refuses (400) a namespace that cannot name one; "" is
// none.
func checkNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if p := namespaceSyntax(ns); p != "" {
		return echo.NewHTTPError(http.StatusBadRequest, p)
	}
	return nil
}

// options are the catalog's list options of the query, narrowed to the
// session's namespaces.
func (q listQuery) options(c echo.Context) catalog.ListOptions {
	return scoped(c, catalog.ListOptions{Namespace: q.Namespace, Limit: q.Limit, Continue: q.Continue})
}

// url is the address of path with the query's namespace and page size,
// starting at cont.
func (q listQuery) url(path, cont string) string {
	v := url.Values{}
	if q.Namespace != "" {
		v.Set("namespace", q.Namespace)
	}
	if q.Limit != pageSize {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if cont != "" {
		v.Set("continue", cont)
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// pager is what a list page shows around its rows: the namespace filter,
// links to the first and the next page, and the address of its live
// updates (the same page, streamed).
type pager struct {
	Path      string
	Namespace string
	// Namespaces, for a session limited to them, are the filter's choices.
	Namespaces []string
	First      string
	Next       string
	Live       string
}

func newPager(c echo.Context, q listQuery, path, live, next string) pager {
	p := pager{Path: path, Namespace: q.Namespace, Live: q.url(live, q.Continue)}
	if sess, _ := sessionOf(c); !sess.AllNamespaces() {
		p.Namespaces = sess.Namespaces
	}
	if q.Continue != "" {
		p.First = q.url(path, "")
	}
	if next != "" {
		p.Next = q.url(path, next)
	}
	return p
}
