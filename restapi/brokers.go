package restapi

import (
	"encoding/json"
	"net/http"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/labstack/echo/v4"

	"github.com/bindery-dev/bindery/catalog"
)

// brokerRequest is the body of POST /brokers.
type brokerRequest struct {
	Name string `json:"name"`
	// Namespace, when set, registers the broker in that namespace (a
	// ServiceBroker); otherwise it is the cluster's.
	Namespace             string                       `json:"namespace,omitempty"`
	URL                   string                       `json:"url"`
	Auth                  *catalog.BrokerAuth          `json:"auth,omitempty"`
	CABundle              string                       `json:"caBundle,omitempty"`
	InsecureSkipTLSVerify bool                         `json:"insecureSkipTLSVerify,omitempty"`
	RelistBehavior        string                       `json:"relistBehavior,omitempty"`
	RelistDuration        string                       `json:"relistDuration,omitempty"`
	CatalogRestrictions   *catalog.CatalogRestrictions `json:"catalogRestrictions,omitempty"`
	Labels                map[string]string            `json:"labels,omitempty"`
	// KeepAuth, in a PATCH that changes the URL, keeps the stored
	// credentials for the new address.
	KeepAuth bool `json:"keepAuth,omitempty"`
}

func (r *brokerRequest) apply(b *catalog.Broker) {
	b.Name, b.Namespace, b.Labels = r.Name, r.Namespace, r.Labels
	b.Spec.URL, b.Spec.CABundle, b.Spec.InsecureSkipTLSVerify = r.URL, r.CABundle, r.InsecureSkipTLSVerify
	b.Spec.RelistBehavior, b.Spec.RelistDuration, b.Spec.CatalogRestrictions = r.RelistBehavior, r.RelistDuration, r.CatalogRestrictions
}

// createBroker registers a broker and fetches its catalogue before
// answering; a broker that cannot be reached is registered all the same,
// with a status that says why, and is retried with backoff.
func (s *Server) createBroker(c echo.Context) error {
	var req brokerRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := allowScope(c, req.Namespace); err != nil {
		return err
	}
	wait, err := boolParam(c, "wait")
	if err != nil {
		return err
	}
	b := &catalog.Broker{}
	req.apply(b)
	b, err = s.store.CreateBroker(ctx(c), b, req.Auth)
	if err != nil {
		return requestFields(err)
	}
	if wait != nil && !*wait {
		// The relister fetches it when it next looks (it is due now).
		return c.JSON(http.StatusCreated, b)
	}
	if synced, err := s.store.Relist(ctx(c), b.ID); synced != nil {
		b = synced
	} else if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, b)
}

func (s *Server) listBrokers(c echo.Context) error {
	opts, err := listOptions(c)
	if err != nil {
		return err
	}
	if err := scopeCatalog(c, &opts); err != nil {
		return err
	}
	l, err := s.store.ListBrokers(ctx(c), opts)
	if err != nil {
		return err
	}
	if err := s.plansAsSeen(c, l.Items...); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (s *Server) getBroker(c echo.Context) error {
	b, err := s.broker(c)
	if err != nil {
		return err
	}
	if err := s.plansAsSeen(c, b); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

// plansAsSeen gives the cluster brokers' counts of plans as the request's
// token sees them: to a token limited to namespaces, a plan hidden from
// all of them does not exist (catalog.PlansVisibleIn).
func (s *Server) plansAsSeen(c echo.Context, brokers ...*catalog.Broker) error {
	t := tokenOf(c)
	if t == nil || t.AllNamespaces() {
		return nil
	}
	return s.store.CountPlansVisibleIn(ctx(c), t.Namespaces, brokers...)
}

// updateBroker applies a JSON merge patch (RFC 7386) to the broker's
// registration fields; `auth`, when present, replaces the credentials.
func (s *Server) updateBroker(c echo.Context) error {
	current, err := s.broker(c)
	if err != nil {
		return err
	}
	if err := allowScope(c, current.Namespace); err != nil {
		return err
	}
	patch, err := readPatch(c)
	if err != nil {
		return err
	}
	updated, err := s.store.UpdateBroker(ctx(c), current.ID, 0, func(b *catalog.Broker) (*catalog.BrokerAuth, error) {
		before := brokerRequest{
			Name: b.Name, Namespace: b.Namespace, URL: b.Spec.URL, CABundle: b.Spec.CABundle, InsecureSkipTLSVerify: b.Spec.InsecureSkipTLSVerify,
			RelistBehavior: b.Spec.RelistBehavior, RelistDuration: b.Spec.RelistDuration,
			CatalogRestrictions: b.Spec.CatalogRestrictions, Labels: b.Labels,
		}
		var after brokerRequest
		if err := mergeInto(before, patch, &after); err != nil {
			return nil, err
		}
		if after.Name != b.Name {
			return nil, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: "name", Message: "The name of a broker cannot be changed: register another broker instead."}
		}
		if after.Namespace != b.Namespace {
			return nil, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: "namespace", Message: "The namespace of a broker cannot be changed: register another broker instead."}
		}
		if after.RelistBehavior == catalog.RelistManual && before.RelistBehavior != catalog.RelistManual {
			after.RelistDuration = ""
		}
		after.apply(b)
		if after.Auth == nil && after.KeepAuth {
			return catalog.KeepAuth, nil
		}
		return after.Auth, nil
	})
	if err != nil {
		return requestFields(err)
	}
	if updated.Generation != current.Generation {
		if synced, _ := s.store.Relist(ctx(c), updated.ID); synced != nil {
			updated = synced
		}
	}
	return c.JSON(http.StatusOK, updated)
}

func (s *Server) deleteBroker(c echo.Context) error {
	b, err := s.broker(c)
	if err != nil {
		return err
	}
	if err := allowScope(c, b.Namespace); err != nil {
		return err
	}
	if err := s.store.DeleteBroker(ctx(c), b.ID); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// relistBroker fetches the broker's catalogue now. The answer is the
// broker, whose status says how the fetch went.
func (s *Server) relistBroker(c echo.Context) error {
	b, err := s.broker(c)
	if err != nil {
		return err
	}
	if err := allowScope(c, b.Namespace); err != nil {
		return err
	}
	synced, err := s.store.Relist(ctx(c), b.ID)
	if synced == nil {
		return err
	}
	return c.JSON(http.StatusOK, synced)
}

func (s *Server) brokerEvents(c echo.Context) error {
	b, err := s.broker(c)
	if err != nil {
		return err
	}
	return s.events(c, b.ID)
}

func (s *Server) events(c echo.Context, id string) error {
	events, err := s.store.Events(ctx(c), id, 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": events})
}

// readPatch reads a JSON merge patch body.
func readPatch(c echo.Context) ([]byte, error) {
	var obj map[string]json.RawMessage
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, apiError(http.StatusBadRequest, "invalid", "request body: a JSON merge patch object is required")
	}
	return body, nil
}

// mergeInto applies patch to before and decodes the result strictly into
// after, so unknown fields in the patch are reported.
func mergeInto(before any, patch []byte, after any) error {
	doc, err := json.Marshal(before)
	if err != nil {
		return err
	}
	merged, err := jsonpatch.MergePatch(doc, patch)
	if err != nil {
		return apiError(http.StatusBadRequest, "invalid", "request body: %v", err)
	}
	return decodeBytes(merged, after)
}

// requestFields names the fields of a broker's validation errors as the
// request has them: the registration fields are at the top level there,
// under spec in the broker.
func requestFields(err error) error {
	v, ok := catalog.AsValidation(err)
	if !ok {
		return err
	}
	out := &catalog.ValidationError{}
	for _, fe := range v.Errors {
		e := *fe
		e.Field = strings.TrimPrefix(e.Field, "spec.")
		out.Errors = append(out.Errors, &e)
	}
	return out
}
