package osb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	v2 "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/bindery-dev/bindery/internal/backoff"
	"github.com/bindery-dev/bindery/internal/pgtext"
)

// MaxCatalog bounds a catalogue document (100 services × 10 plans with
// schemas is about 2 MB). It is decoded as it arrives, a service at a
// time, and kept as the JSON the broker sent: its memory is about its
// size, not that of the decoded objects.
const MaxCatalog = 32 << 20

// Service is an OSB service offering: the client library's type, plus the
// 2.15+ fields it lacks, plus the whole object as the broker sent it.
type Service struct {
	v2.Service
	AllowContextUpdates bool   `json:"allow_context_updates,omitempty"`
	Plans               []Plan `json:"plans"`
	// Raw is the service object as sent, without its plans and with any
	// dashboard_client secret removed (it is not Bindery's to keep).
	Raw json.RawMessage `json:"-"`
}

// Plan is an OSB plan with the 2.15+ fields and its raw object.
type Plan struct {
	v2.Plan
	BindingRotatable bool            `json:"binding_rotatable,omitempty"`
	Raw              json.RawMessage `json:"-"`
}

// Catalogue is a checked catalogue, each service and plan kept as the JSON
// the broker sent; Service decodes one at a time.
type Catalogue struct {
	entries []catalogueEntry
	size    int
	// Digest is the SHA-256 of the document as the broker sent it.
	Digest []byte
	// ETag is the broker's entity tag for the document, when it sent one
	// that can be sent back (etag): OSB lets a platform ask for the
	// catalogue with it again (If-None-Match), and a broker answer 304 Not
	// Modified.
	ETag string
	// Same says the document is the one fetched before (Catalog's last):
	// the broker answered 304 to its ETag, or sent it again. It is not
	// checked again, and has no services here.
	Same bool
	// NotModified says the broker answered 304 (Same is set too).
	NotModified bool
}

// Fetched is what a platform keeps of the catalogue it fetched last: the
// ETag the broker sent with it, and its digest.
//
// A Last-Modified is not kept: If-Modified-Since asks whether the document
// changed since a date, and a broker rolled back to an older catalogue
// (an older image, a file restored with its date) would answer 304 to it
// for as long as the newer date stays ahead (RFC 7232, 3.3). An ETag
// names the document, whatever its date.
type Fetched struct {
	ETag   string
	Digest []byte
}

type catalogueEntry struct {
	raw   json.RawMessage // the service without plans and dashboard_client
	plans []json.RawMessage
}

// Len is the number of services.
func (c *Catalogue) Len() int { return len(c.entries) }

// Size is the catalogue's size in bytes, as kept.
func (c *Catalogue) Size() int { return c.size }

// ServiceSize is the size in bytes of the i-th service with its plans, as
// kept.
func (c *Catalogue) ServiceSize(i int) int {
	n := len(c.entries[i].raw)
	for _, p := range c.entries[i].plans {
		n += len(p)
	}
	return n
}

// Service decodes the i-th service (in the broker's order) with its plans.
func (c *Catalogue) Service(i int) (Service, error) {
	e := c.entries[i]
	var s Service
	if err := json.Unmarshal(e.raw, &s); err != nil {
		return s, fmt.Errorf("services[%d]: %w", i, err)
	}
	s.Raw = e.raw
	s.Plans = make([]Plan, len(e.plans))
	for j, raw := range e.plans {
		if err := json.Unmarshal(raw, &s.Plans[j]); err != nil {
			return s, fmt.Errorf("services[%d].plans[%d]: %w", i, j, err)
		}
		s.Plans[j].Raw = raw
	}
	return s, nil
}

// Catalog fetches GET /v2/catalog, decodes it as it arrives and checks it
// against the spec: required fields present, ids unique across the
// catalogue, names unique per scope, at least one plan per service,
// maintenance_info with a version, text PostgreSQL can store. Every
// problem is reported with its path. A document larger than MaxCatalog is
// refused without reading the rest.
//
// Given what was kept of the catalogue fetched last, the broker may answer
// that it has not changed (304 to its ETag), or send the same document
// again: the Catalogue returned says so (Same), and the document is not
// checked again.
func (c *Client) Catalog(ctx context.Context, last Fetched) (*Catalogue, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v2/catalog", nil)
	if err != nil {
		return nil, err
	}
	c.authorize(req)
	if last.ETag != "" {
		req.Header.Set("If-None-Match", last.ETag)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch catalog: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotModified && last.ETag != "" {
		// A 304 names the tag it answers for, if it names one (RFC 7232,
		// 4.1); another tag is not the document kept.
		if tag := res.Header.Get("ETag"); tag != "" && !sameTag(tag, last.ETag) {
			return c.Catalog(ctx, Fetched{Digest: last.Digest})
		}
		return &Catalogue{Same: true, NotModified: true, Digest: last.Digest, ETag: last.ETag}, nil
	}
	if res.StatusCode != http.StatusOK {
		raw, err := readAnswer(res, MaxAnswer)
		if err != nil {
			return nil, fmt.Errorf("fetch catalog: %w", err)
		}
		return nil, decodeError(raw)
	}
	digest := sha256.New()
	services, err := splitCatalogue(io.TeeReader(&capReader{r: res.Body, left: MaxCatalog}, digest))
	if err != nil {
		return nil, err
	}
	sum := digest.Sum(nil)
	if last.Digest != nil && bytes.Equal(sum, last.Digest) {
		return &Catalogue{Same: true, Digest: sum, ETag: etag(res.Header.Get("ETag"))}, nil
	}
	cat, err := checkCatalogue(services)
	if err != nil {
		return nil, err
	}
	cat.Digest = sum
	cat.ETag = etag(res.Header.Get("ETag"))
	return cat, nil
}

// maxETag is the longest ETag kept, to send back.
const maxETag = 256

// etag is v when it is one entity tag (RFC 7232, 2.3: an optional W/, then
// a quoted string of visible ASCII other than the quote) no longer than
// maxETag, and "" otherwise: "*", which If-None-Match takes to match any
// document, a list of tags, or bytes a header cannot carry.
func etag(v string) string {
	opaque := strings.TrimPrefix(v, "W/")
	if len(v) > maxETag || len(opaque) < 2 || opaque[0] != '"' || opaque[len(opaque)-1] != '"' {
		return ""
	}
	for i := 1; i < len(opaque)-1; i++ {
		if c := opaque[i]; c < 0x21 || c == '"' || c > 0x7e {
			return ""
		}
	}
	return v
}

// sameTag is RFC 7232's weak comparison, which If-None-Match uses: the
// same opaque tag, weak or not.
func sameTag(a, b string) bool {
	return strings.TrimPrefix(a, "W/") == strings.TrimPrefix(b, "W/")
}

// errCatalogTooLarge is a catalogue past MaxCatalog.
var errCatalogTooLarge = fmt.Errorf("catalog larger than %d bytes", MaxCatalog)

// capReader reads up to left bytes of r, then fails with
// errCatalogTooLarge if r has more.
type capReader struct {
	r    io.Reader
	left int
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte tells a document that ends at the cap from a longer one.
		var one [1]byte
		if n, _ := io.ReadFull(c.r, one[:]); n > 0 {
			return 0, errCatalogTooLarge
		}
		return 0, io.EOF
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

// ParseCatalog decodes and checks a catalogue document, and decodes all of
// its services.
func ParseCatalog(body []byte) ([]Service, error) {
	services, err := splitCatalogue(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	cat, err := checkCatalogue(services)
	if err != nil {
		return nil, err
	}
	out := make([]Service, cat.Len())
	for i := range out {
		if out[i], err = cat.Service(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitCatalogue reads a catalogue document from r and splits its services
// array into its services' JSON, not yet checked (checkCatalogue). The
// array is nil when the document has none.
func splitCatalogue(r io.Reader) ([]json.RawMessage, error) {
	dec := json.NewDecoder(r)
	invalid := func(err error) error {
		if errors.Is(err, errCatalogTooLarge) {
			return err
		}
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return fmt.Errorf("catalog is not valid JSON: %w", err)
		case errors.Is(err, errNotCatalog):
			return fmt.Errorf("catalog is not valid JSON: %w", err)
		}
		return fmt.Errorf("fetch catalog: %w", err)
	}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, invalid(err)
	}
	var services []json.RawMessage
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, invalid(err)
		}
		if key != "services" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, invalid(err)
			}
			continue
		}
		if services, err = splitServices(dec); err != nil {
			return nil, invalid(err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return nil, invalid(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid(fmt.Errorf("%w: data after the catalog's object", errNotCatalog))
	}
	return services, nil
}

// splitServices reads the services array: nil for null.
func splitServices(dec *json.Decoder) ([]json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("%w: services must be an array", errNotCatalog)
	}
	services := []json.RawMessage{}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		services = append(services, raw)
	}
	if err := expectDelim(dec, ']'); err != nil {
		return nil, err
	}
	return services, nil
}

// checkCatalogue checks each service and keeps what is kept of it, letting
// go of its JSON as it goes, so that the two are held at once for one
// service only.
func checkCatalogue(services []json.RawMessage) (*Catalogue, error) {
	if services == nil {
		return nil, errors.New("catalog: services: required")
	}
	ck := newCatalogueCheck()
	cat := &Catalogue{}
	for i, raw := range services {
		services[i] = nil
		if e, ok := ck.service(i, raw); ok {
			cat.entries = append(cat.entries, e)
			cat.size += len(e.raw)
			for _, p := range e.plans {
				cat.size += len(p)
			}
		}
	}
	if err := ck.err(); err != nil {
		return nil, err
	}
	return cat, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%w: want %q, found %v", errNotCatalog, want, tok)
	}
	return nil
}

// errNotCatalog is a document that is JSON but not shaped as a catalogue.
var errNotCatalog = errors.New("not a catalog object")

// catalogueCheck collects the problems of a catalogue as its services
// arrive: ids are unique across the catalogue, names within their scope.
type catalogueCheck struct {
	problems []string
	ids      map[string]string
	names    map[string]bool
}

func newCatalogueCheck() *catalogueCheck {
	c := &catalogueCheck{}
	c.reset()
	return c
}

func (c *catalogueCheck) reset() {
	c.problems, c.ids, c.names = nil, map[string]string{}, map[string]bool{}
}

func (c *catalogueCheck) bad(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// err is every problem found, the first 10 of them spelled out.
func (c *catalogueCheck) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	problems := c.problems
	if len(problems) > 10 {
		problems = append(problems[:10:10], fmt.Sprintf("and %d more", len(problems)-10))
	}
	return fmt.Errorf("invalid catalog: %s", strings.Join(problems, "; "))
}

// quoted is an id or name for a problem's text, cut to a readable length.
func quoted(s string) string { return strconv.Quote(pgtext.Clip(s, 100)) }

// service checks the i-th service and returns what is kept of it.
func (c *catalogueCheck) service(i int, raw json.RawMessage) (catalogueEntry, bool) {
	path := fmt.Sprintf("services[%d]", i)
	if err := pgtext.CheckJSON(path, raw); err != nil {
		c.bad("%v", err)
		return catalogueEntry{}, false
	}
	var s Service
	if err := json.Unmarshal(raw, &s); err != nil {
		c.bad("%s: %v", path, err)
		return catalogueEntry{}, false
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(raw, &obj)
	var plans []json.RawMessage
	_ = json.Unmarshal(obj["plans"], &plans)
	delete(obj, "plans")
	delete(obj, "dashboard_client")
	kept, _ := json.Marshal(obj)
	c.required(path, s.ID, s.Name, s.Description)
	c.id(path, s.ID)
	if c.names[s.Name] && s.Name != "" {
		c.bad("%s.name: %s is not unique", path, quoted(s.Name))
	}
	c.names[s.Name] = true
	if len(s.Plans) == 0 {
		c.bad("%s.plans: at least one plan is required", path)
	}
	planNames := map[string]bool{}
	for j := range s.Plans {
		p := &s.Plans[j]
		ppath := fmt.Sprintf("%s.plans[%d]", path, j)
		c.required(ppath, p.ID, p.Name, p.Description)
		c.id(ppath, p.ID)
		if planNames[p.Name] && p.Name != "" {
			c.bad("%s.name: %s is not unique within the service", ppath, quoted(p.Name))
		}
		planNames[p.Name] = true
		switch {
		case p.MaintenanceInfo == nil:
		case p.MaintenanceInfo.Version == "":
			c.bad("%s.maintenance_info.version: required", ppath)
		case len(p.MaintenanceInfo.Version) > MaxCatalogID:
			c.bad("%s.maintenance_info.version: longer than %d bytes", ppath, MaxCatalogID)
		}
	}
	return catalogueEntry{raw: kept, plans: plans}, len(plans) == len(s.Plans)
}

// MaxCatalogID bounds the ids and names of services and plans, and
// maintenance versions, in bytes: OSB recommends strings of at most 255
// characters, and these are keys.
const MaxCatalogID = 255

// required checks that an object's id, name and description are there,
// and its id and name within MaxCatalogID.
func (c *catalogueCheck) required(path, id, name, description string) {
	for _, f := range []struct{ name, v string }{{"id", id}, {"name", name}, {"description", description}} {
		if strings.TrimSpace(f.v) == "" {
			c.bad("%s.%s: required", path, f.name)
		}
	}
	for _, f := range []struct{ name, v string }{{"id", id}, {"name", name}} {
		if len(f.v) > MaxCatalogID {
			c.bad("%s.%s: longer than %d bytes", path, f.name, MaxCatalogID)
		}
	}
}

// id checks that an id is unique across the catalogue.
func (c *catalogueCheck) id(path, id string) {
	if id == "" {
		return
	}
	if prev, dup := c.ids[id]; dup {
		c.bad("%s.id: %s is also the id of %s", path, quoted(id), prev)
		return
	}
	c.ids[id] = path
}

// readAnswer reads an answer's body up to limit bytes.
func readAnswer(res *http.Response, limit int) (*rawResponse, error) {
	out := &rawResponse{status: res.StatusCode, header: res.Header, limit: limit}
	// One byte more than the bound tells a body at the bound from a longer
	// one; the rest is not read (the connection is closed, not drained).
	raw, err := io.ReadAll(io.LimitReader(res.Body, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > limit {
		out.tooLarge = true
	} else {
		out.body = raw
	}
	return out, nil
}

// decodeError reads an OSB error answer: its description and code cut
// to their bounds, or, for a body past MaxAnswer, only its status.
func decodeError(r *rawResponse) error {
	e := &HTTPError{Status: r.status, RetryAfter: backoff.RetryAfter(r.header.Get("Retry-After"), time.Now())}
	if r.tooLarge {
		e.Description = r.errTooLarge().Error()
		return e
	}
	var doc struct {
		Error            string `json:"error"`
		Description      string `json:"description"`
		InstanceUsable   *bool  `json:"instance_usable"`
		UpdateRepeatable *bool  `json:"update_repeatable"`
	}
	if json.Unmarshal(bytes.TrimSpace(r.body), &doc) == nil {
		e.Code, e.Description = pgtext.Clip(doc.Error, MaxErrorCode), pgtext.Clip(doc.Description, MaxDescription)
		e.InstanceUsable, e.UpdateRepeatable = doc.InstanceUsable, doc.UpdateRepeatable
	}
	return e
}
