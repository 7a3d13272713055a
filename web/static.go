package web

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/labstack/echo/v4"
)

//go:embed static
var staticFiles embed.FS

var staticHandler = func() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	return http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
}()

// static serves the UI's scripts and stylesheet, embedded in the binary.
func (s *Server) static(c echo.Context) error {
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	staticHandler.ServeHTTP(c.Response(), c.Request())
	return nil
}
