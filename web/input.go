package web

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/internal/pgtext"
)

// maxForm is the largest request body the UI reads: its forms are small,
// and a plan's parameters are at most a few kB.
const maxForm = 1 << 20

// problemsKey is where input leaves the problems of posted fields.
const problemsKey = "bindery.input"

// input reads what a request brings before anything else looks at it. A
// body over maxForm is refused (413), a form that cannot be parsed too
// (400). Path and query parameters that PostgreSQL could not hold (a NUL
// character, invalid UTF-8) are refused with 400 naming the parameter.
// Posted fields with such text are kept aside by name: a form page shows
// each next to its field (see form handlers in h), every other action
// refuses the request (400) naming the field. Nothing of such input
// reaches the catalog.
func (s *Server) input(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		for i, name := range c.ParamNames() {
			if p := pgtext.Problem(c.ParamValues()[i]); p != "" {
				return s.renderError(c, http.StatusBadRequest, "The address's "+name+" "+p+".")
			}
		}
		// The query string is read strictly: a malformed one is an error
		// rather than parameters silently dropped.
		query, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return s.renderError(c, http.StatusBadRequest, "The address's query string cannot be read: "+err.Error()+".")
		}
		if name, p := firstProblem(query); p != "" {
			return s.renderError(c, http.StatusBadRequest, "The query parameter "+quoteName(name)+" "+p+".")
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
			return next(c)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxForm)
		posted, err := c.FormParams()
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return s.renderError(c, http.StatusRequestEntityTooLarge, "The form is larger than the limit of 1 MiB.")
			}
			return s.renderError(c, http.StatusBadRequest, "The form cannot be read: "+err.Error()+".")
		}
		problems := map[string]string{}
		for name, values := range posted {
			if p := pgtext.Problem(name); p != "" {
				problems[strings.ToValidUTF8(name, "\uFFFD")] = "has a name that " + p
				continue
			}
			for _, v := range values {
				if p := pgtext.Problem(v); p != "" {
					problems[name] = p
					break
				}
			}
		}
		if len(problems) > 0 {
			c.Set(problemsKey, problems)
		}
		return next(c)
	}
}

// firstProblem finds, in a stable order, the first name or value of vs
// that PostgreSQL could not hold.
func firstProblem(vs url.Values) (string, string) {
	names := make([]string, 0, len(vs))
	for n := range vs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if p := pgtext.Problem(n); p != "" {
			return n, "has a name that " + p
		}
		for _, v := range vs[n] {
			if p := pgtext.Problem(v); p != "" {
				return n, p
			}
		}
	}
	return "", ""
}

// quoteName shows a parameter's name readably, whatever bytes it has.
func quoteName(n string) string { return `"` + printable(n) + `"` }

// printable is s with invalid UTF-8 and NUL characters made visible.
func printable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\0`)
}

// inputProblems are the problems input found in posted fields, by field
// name; a form handler shows them next to their fields.
func inputProblems(c echo.Context) map[string]string {
	p, _ := c.Get(problemsKey).(map[string]string)
	return p
}

// refuseProblems answers 400 naming the first posted field whose text
// cannot be stored, for actions that have no form to show it in.
func (s *Server) refuseProblems(c echo.Context) error {
	problems := inputProblems(c)
	names := make([]string, 0, len(problems))
	for n := range problems {
		names = append(names, n)
	}
	slices.Sort(names)
	n := names[0]
	return s.renderError(c, http.StatusBadRequest, "The field "+quoteName(n)+" "+problems[n]+".")
}
