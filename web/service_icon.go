package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"html"
	"net/http"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// iconPolicy is the Content-Security-Policy of an icon: an SVG opened
// on its own can run nothing and load nothing (the catalog has made it
// safe already; this holds whatever it missed).
const iconPolicy = "default-src 'none'; style-src 'unsafe-inline'; sandbox"

// iconRoute is the address of a service's icon.
const iconRoute = "/services/:id/icon"

// serviceIcon serves a service's icon: the one its broker named, as the
// catalog fetched and checked it at the last catalogue fetch, or one drawn
// here from the service's name when there is none (none named, not
// fetched yet, or refused). The browser asks Bindery only, never the
// broker's site.
func (s *Server) serviceIcon(c echo.Context) error {
	class, err := s.serviceClass(c)
	if err != nil {
		return err
	}
	ic, err := s.store.ClassIcon(c.Request().Context(), class)
	maxAge := "3600"
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		// Drawn for now: asked again sooner, as the broker's may come.
		ic, maxAge = drawnIcon(displayName(class.Spec.Metadata().DisplayName, class.Spec.ExternalName)), "300"
	case err != nil:
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", iconPolicy)
	h.Set("Cache-Control", "private, max-age="+maxAge)
	h.Set("ETag", ic.ETag)
	if c.Request().Header.Get("If-None-Match") == ic.ETag {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, ic.ContentType, ic.Body)
}

// drawnIcon is a service's generated icon: its initials on a square of a
// colour its name chooses, so that services without an icon still look
// apart.
func drawnIcon(name string) *catalog.Icon {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	hue := h.Sum32() % 360
	body := fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="64" height="64">`+
		`<rect width="64" height="64" rx="14" fill="hsl(%d 50%% 34%%)"/>`+
		`<text x="32" y="32" dy=".35em" text-anchor="middle" font-family="system-ui, sans-serif" font-size="26" font-weight="600" fill="#fff">%s</text></svg>`,
		hue, html.EscapeString(initials(name)))
	sum := sha256.Sum256([]byte(body))
	return &catalog.Icon{ContentType: "image/svg+xml", Body: []byte(body), ETag: `"d-` + hex.EncodeToString(sum[:12]) + `"`}
}

// initials are the first letters (or digits) of a name's first two
// words, in capitals: "PostgreSQL" P, "fake-service-1" FS.
func initials(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	var out []rune
	for _, w := range words {
		out = append(out, unicode.ToUpper([]rune(w)[0]))
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return string(out)
}
