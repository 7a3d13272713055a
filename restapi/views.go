package restapi

import (
	"context"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/warning"

	"github.com/bindery-dev/bindery/catalog"
)

// An instance or binding is answered with where it stands (progress: what
// a client that waits needs to tell "still working" from "stuck, and
// why") and, from the request that created or changed it, the catalog's
// warnings (a class, plan or instance it names that does not exist yet),
// which are also sent as Warning headers, as the Kubernetes API sends
// them. Lists carry neither: their items are the objects as stored.

// InstanceView is an instance as a single-object answer shows it
// (openapi.yaml's InstanceObject).
type InstanceView struct {
	catalog.Instance
	Progress catalog.Progress `json:"progress"`
	Warnings []string         `json:"warnings,omitempty"`
}

// BindingView is a binding as a single-object answer shows it
// (openapi.yaml's BindingObject).
type BindingView struct {
	catalog.Binding
	Progress catalog.Progress `json:"progress"`
	Warnings []string         `json:"warnings,omitempty"`
}

// SetBlockedAfter sets how long an object may wait for something missing
// before its progress says blocked (catalog.DefaultBlockedAfter unless
// set).
func (s *Server) SetBlockedAfter(d time.Duration) { s.blockedAfter = d }

func (s *Server) blockedAfterOr() time.Duration {
	if s.blockedAfter > 0 {
		return s.blockedAfter
	}
	return catalog.DefaultBlockedAfter
}

// sendInstance answers with the instance, its progress and the request's
// warnings.
func (s *Server) sendInstance(c echo.Context, status int, in *catalog.Instance) error {
	w := sendWarnings(c)
	return c.JSON(status, InstanceView{Instance: *in, Progress: catalog.InstanceProgress(in, time.Now(), s.blockedAfterOr()), Warnings: w})
}

// sendBinding is sendInstance for a binding.
func (s *Server) sendBinding(c echo.Context, status int, b *catalog.Binding) error {
	w := sendWarnings(c)
	return c.JSON(status, BindingView{Binding: *b, Progress: catalog.BindingProgress(b, time.Now(), s.blockedAfterOr()), Warnings: w})
}

// warnings collects the warnings of one request, each once.
type warnings struct{ texts []string }

// AddWarning is warning.Recorder's: the agent is left out, as the API
// server's own warnings do.
func (w *warnings) AddWarning(_, text string) {
	if text != "" && !slices.Contains(w.texts, text) {
		w.texts = append(w.texts, text)
	}
}

type warningsKey struct{}

// recordWarnings gives the request a warning recorder that the catalog's
// writes report to.
func recordWarnings(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		w := &warnings{}
		ctx := warning.WithWarningRecorder(c.Request().Context(), w)
		ctx = context.WithValue(ctx, warningsKey{}, w)
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

// sendWarnings sets a Warning header for each warning of the request
// (RFC 7234's form with code 299, as the Kubernetes API writes them) and
// returns them for the body.
func sendWarnings(c echo.Context) []string {
	w, _ := c.Request().Context().Value(warningsKey{}).(*warnings)
	if w == nil {
		return nil
	}
	for _, t := range w.texts {
		if h, err := utilnet.NewWarningHeader(299, "-", t); err == nil {
			c.Response().Header().Add("Warning", h)
		}
	}
	return w.texts
}
