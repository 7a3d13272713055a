package web

import (
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/web/form"
)

// posted reads the request's form, with the problems the input
// middleware found in it (text that cannot be stored).
func (s *Server) posted(c echo.Context) *form.Posted {
	values, _ := c.FormParams() // read already by the input middleware
	return form.Read(values, inputProblems(c))
}

// plural is "1 service", "2 services".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
