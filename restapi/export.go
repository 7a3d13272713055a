package restapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bindery-dev/bindery/catalog"
)

// An export (GET /export/instances, /export/bindings, /export/brokers) is
// every object of a kind the token may see, as newline-delimited JSON:
// one object a line, the document a list's item is. It is read from one
// snapshot, a chunk at a time (catalog.Store.ScanRaw), and each chunk is
// written before the next is read, so the server's memory does not grow
// with the catalog. An error before the first byte is answered as the
// API's errors are; after it, the response is cut short (the connection is
// reset), so that a client sees a broken export rather than a complete-
// looking short one. A snapshot is held for at most the store's snapshot
// limit (a minute): a client that reads slower than that is cut off too.

// DefaultExports is how many exports a server serves at once unless
// SetExports says otherwise: each holds a connection of the database pool
// that everything else shares for as long as it is read, so more are
// answered 429.
const DefaultExports = 4

// SetExports sets how many exports the server serves at once (n > 0).
func (s *Server) SetExports(n int) {
	if n > 0 {
		s.exports = make(chan struct{}, n)
	}
}

// ndjson is the media type of an export.
const ndjson = "application/x-ndjson"

// revisionHeader carries the revision of an export's snapshot: the export
// holds every change up to it and none after.
const revisionHeader = "Bindery-Revision"

func (s *Server) exportInstances(c echo.Context) error {
	return s.exportNamespaced(c, catalog.KindInstance)
}

func (s *Server) exportBindings(c echo.Context) error {
	return s.exportNamespaced(c, catalog.KindBinding)
}

// exportNamespaced exports instances or bindings: of ?namespace=, or of
// every namespace the token may read.
func (s *Server) exportNamespaced(c echo.Context, kind string) error {
	opts, err := exportOptions(c)
	if err != nil {
		return err
	}
	if err := scopeList(c, &opts); err != nil {
		return err
	}
	return s.export(c, kind, opts)
}

// exportBrokers exports the cluster's brokers, or those of ?namespace=,
// as GET /brokers lists them.
func (s *Server) exportBrokers(c echo.Context) error {
	opts, err := exportOptions(c)
	if err != nil {
		return err
	}
	if err := scopeCatalog(c, &opts); err != nil {
		return err
	}
	kind := catalog.KindBroker
	if opts.Namespaced {
		kind = catalog.KindNamespacedBroker
	}
	return s.export(c, kind, opts)
}

// exportSlot takes one of the exports the server sends at once for the
// request's token, which may read one at a time: one party's slow exports
// would otherwise hold every slot, and every other party's export be
// refused. done gives it back; a token reading one already, or a server
// sending as many as it may, is answered 429.
func (s *Server) exportSlot(c echo.Context) (done func(), err error) {
	var id string
	if t := tokenOf(c); t != nil {
		id = t.ID
	}
	s.exportMu.Lock()
	busy := id != "" && s.exporting[id]
	if !busy && id != "" {
		s.exporting[id] = true
	}
	s.exportMu.Unlock()
	if busy {
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
		return nil, apiError(http.StatusTooManyRequests, "too_many_requests",
			"This token is reading an export already, and reads one at a time; try again once it ends, or read the list in pages.")
	}
	release := func() {
		s.exportMu.Lock()
		delete(s.exporting, id)
		s.exportMu.Unlock()
	}
	select {
	case s.exports <- struct{}{}:
		return func() { <-s.exports; release() }, nil
	default:
		release()
		c.Response().Header().Set("Retry-After", retryAfterSeconds)
		return nil, apiError(http.StatusTooManyRequests, "too_many_requests",
			"This server is sending %d exports already, as many as it sends at once; try again in %s seconds, or read the list in pages.", cap(s.exports), retryAfterSeconds)
	}
}

// exportOptions reads namespace and labelSelector. An export takes no
// other parameter (openapi/openapi.yaml): one that asks for a page (limit,
// continue) is refused before it gets here, rather than sent everything.
func exportOptions(c echo.Context) (catalog.ListOptions, error) {
	opts := catalog.ListOptions{Namespace: c.QueryParam("namespace")}
	if v := c.QueryParam("labelSelector"); v != "" {
		sel, err := labels.Parse(v)
		if err != nil {
			return opts, &APIError{Status: http.StatusBadRequest, Code: "invalid", Field: "labelSelector",
				Message: fmt.Sprintf("The label selector (labelSelector) is not valid: %v.", err)}
		}
		opts.Labels = sel
	}
	return opts, nil
}

// export streams the objects of kind that opts select.
func (s *Server) export(c echo.Context, kind string, opts catalog.ListOptions) error {
	done, err := s.exportSlot(c)
	if err != nil {
		return err
	}
	defer done()
	w := c.Response()
	var line []byte
	err = s.store.ScanRaw(ctx(c), kind, opts, func(rev int64, _ string, items []*catalog.RawObject) error {
		if !w.Committed {
			w.Header().Set(echo.HeaderContentType, ndjson)
			w.Header().Set(revisionHeader, strconv.FormatInt(rev, 10))
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
		if kind == catalog.KindBroker {
			if err := s.rawPlansAsSeen(c, items); err != nil {
				return err
			}
		}
		for _, o := range items {
			var err error
			if line, err = o.AppendJSON(line[:0]); err != nil {
				return err
			}
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
		if len(items) > 0 {
			// Not before a first write: a flush commits the answer's
			// headers, and an empty export may still end in an error.
			w.Flush()
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if !w.Committed {
		if errors.Is(err, catalog.ErrSnapshotExpired) {
			c.Response().Header().Set("Retry-After", retryAfterSeconds)
			return apiError(http.StatusServiceUnavailable, "unavailable", "The export could not be read within its time limit; try again in %s seconds.", retryAfterSeconds)
		}
		return err
	}
	if ctx(c).Err() == nil {
		s.log.WarnContext(ctx(c), "export cut short", "path", c.Path(), "error", err)
	}
	// net/http resets the stream (or closes the connection, without the
	// last chunk) and logs no panic for this value.
	panic(http.ErrAbortHandler)
}

// rawPlansAsSeen is plansAsSeen for exported cluster brokers.
func (s *Server) rawPlansAsSeen(c echo.Context, brokers []*catalog.RawObject) error {
	t := tokenOf(c)
	if t == nil || t.AllNamespaces() || len(brokers) == 0 {
		return nil
	}
	ids := make([]string, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	counts, err := s.store.PlansVisibleIn(ctx(c), t.Namespaces, ids)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		var st catalog.BrokerStatus
		if err := json.Unmarshal(b.Status, &st); err != nil {
			return fmt.Errorf("decode the status of broker %s: %w", b.Name, err)
		}
		st.ServicePlanCount = counts[b.ID]
		if b.Status, err = json.Marshal(&st); err != nil {
			return err
		}
	}
	return nil
}
