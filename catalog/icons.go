package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // icon formats: decoded for their size only
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "golang.org/x/image/webp" // WebP icons, decoded for their size only
	"golang.org/x/sync/errgroup"

	"github.com/bindery-dev/bindery/internal/osb"
	"github.com/bindery-dev/bindery/internal/svgsafe"
)

// Bounds of the service icons a broker's catalogue names (metadata
// imageUrl). The browser never asks a broker's site for them: the catalog
// fetches them when it fetches the catalogue, through the broker egress
// policy, checks them and keeps them, and the UI serves them.
const (
	// maxIconBytes is the largest icon kept (icons are a few kB).
	maxIconBytes = 128 << 10
	// maxIconSide is the largest width or height of a raster icon: a
	// small file can claim a huge picture that the browser would then
	// decode.
	maxIconSide = 1024
	// maxIconsPerBroker is how many different icons one catalogue gets,
	// and each broker's share of the table, failed fetches counted: one
	// broker's icons, however many its relists name, never take another's
	// room (a namespace's broker is its tenant's to fill). Services
	// beyond it show the UI's generated icon. A broker's icons that its
	// services no longer name go at its next refresh, and all of them go
	// with the broker.
	maxIconsPerBroker = 256
	// iconFetchers fetch in parallel, each within iconFetchTimeout; one
	// refresh takes at most iconRefreshBudget.
	iconFetchers      = 4
	iconFetchTimeout  = 5 * time.Second
	iconRefreshBudget = 10 * time.Second
	// iconFresh is how long a fetched icon is used before it is asked for
	// again (conditionally, with its ETag); iconRetry is how long a failed
	// fetch is remembered.
	iconFresh = 24 * time.Hour
	iconRetry = time.Hour
)

// Icon is a service's icon as Bindery serves it: checked PNG, JPEG, GIF
// or WebP, or SVG rewritten by internal/svgsafe.
type Icon struct {
	ContentType string
	Body        []byte
	// ETag identifies Body, for the browser's cache.
	ETag string
}

func iconKey(u string) []byte {
	sum := sha256.Sum256([]byte(u))
	return sum[:]
}

// ClassIcon reads the icon a class's metadata names, as its broker's last
// catalogue fetch stored it: ErrNotFound when the class names none, or
// when it could not be fetched or used (the UI then draws its own).
func (s *Store) ClassIcon(ctx context.Context, class *ServiceClass) (*Icon, error) {
	u := class.Spec.Metadata().ImageURL
	if u == "" || class.ID == "" {
		return nil, ErrNotFound
	}
	ic := &Icon{}
	err := s.pool.QueryRow(ctx, `SELECT content_type, body FROM catalog.service_icons
		WHERE broker_id = (SELECT broker_id FROM catalog.service_classes WHERE id = $2::uuid) AND url_hash = $1 AND body IS NOT NULL`,
		iconKey(u), class.ID).Scan(&ic.ContentType, &ic.Body)
	if err != nil {
		return nil, mapErr(err)
	}
	sum := sha256.Sum256(ic.Body)
	ic.ETag = `"` + hex.EncodeToString(sum[:12]) + `"`
	return ic, nil
}

// knownIcon is what the table holds of an icon before a refresh.
type knownIcon struct {
	etag    string
	next    time.Time
	hasBody bool
}

// iconResult is what a refresh learnt of one icon.
type iconResult struct {
	key         []byte
	contentType string
	body        []byte
	etag        string
	problem     string
	next        time.Time
	unchanged   bool // a 304, or a data: URI already stored
}

// refreshIcons brings the icons of a broker's services up to date after
// its catalogue was stored: first the broker's icons none of its services
// names any more go; then data: URIs are decoded, http(s) URLs fetched
// when new or due (conditionally, with their ETag), every one checked.
// Failures are logged and remembered per icon; they never fail the
// catalogue fetch.
func (s *Store) refreshIcons(ctx context.Context, brokerID string) {
	ctx, cancel := context.WithTimeout(ctx, iconRefreshBudget)
	defer cancel()
	fetched, failed, err := s.refreshIconsOf(ctx, brokerID)
	if err != nil {
		s.log.WarnContext(ctx, "refresh service icons", "broker", brokerID, "error", err)
		return
	}
	if fetched+len(failed) > 0 {
		s.log.InfoContext(ctx, "service icons refreshed", "broker", brokerID, "stored", fetched, "failed", len(failed), "problems", failed)
	}
}

func (s *Store) refreshIconsOf(ctx context.Context, brokerID string) (int, []string, error) {
	// Only this broker's services name its icons, and its catalogue was
	// stored before this refresh: what they do not name is of no use.
	if _, err := s.pool.Exec(ctx, `DELETE FROM catalog.service_icons i WHERE i.broker_id = $1 AND NOT EXISTS (
		SELECT 1 FROM catalog.service_classes c WHERE c.broker_id = $1 AND NOT c.removed AND c.spec #>> '{externalMetadata,imageUrl}' IS NOT NULL
			AND sha256(convert_to(trim(c.spec #>> '{externalMetadata,imageUrl}'), 'UTF8')) = i.url_hash)`, brokerID); err != nil {
		return 0, nil, mapErr(err)
	}
	urls, known, room, err := s.iconsToCheck(ctx, brokerID)
	if err != nil {
		return 0, nil, err
	}
	now := s.now()
	results := make([]*iconResult, len(urls))
	g := errgroup.Group{}
	g.SetLimit(iconFetchers)
	for i, u := range urls {
		k, ok := known[string(iconKey(u))]
		switch {
		case ok && (strings.HasPrefix(u, "data:") || now.Before(k.next)):
			continue // stored, and not due
		case !ok && room <= 0:
			continue // the broker's share is full: the UI draws this one
		case !ok:
			room--
		}
		g.Go(func() error {
			results[i] = s.checkIconURL(ctx, u, k)
			return nil
		})
	}
	_ = g.Wait()
	batch := &pgx.Batch{}
	stored := 0
	var failed []string
	for _, r := range results {
		switch {
		case r == nil:
		case r.problem != "":
			failed = append(failed, r.problem)
			batch.Queue(`INSERT INTO catalog.service_icons (broker_id, url_hash, problem, fetched_at, next_fetch_at) VALUES ($1, $2, $3, now(), $4)
				ON CONFLICT (broker_id, url_hash) DO UPDATE SET problem = EXCLUDED.problem, fetched_at = now(), next_fetch_at = EXCLUDED.next_fetch_at`,
				brokerID, r.key, r.problem, r.next)
		case r.unchanged:
			batch.Queue(`UPDATE catalog.service_icons SET problem = '', fetched_at = now(), next_fetch_at = $3 WHERE broker_id = $1 AND url_hash = $2`,
				brokerID, r.key, r.next)
		default:
			stored++
			batch.Queue(`INSERT INTO catalog.service_icons (broker_id, url_hash, content_type, body, etag, fetched_at, next_fetch_at) VALUES ($1, $2, $3, $4, $5, now(), $6)
				ON CONFLICT (broker_id, url_hash) DO UPDATE SET content_type = EXCLUDED.content_type, body = EXCLUDED.body, etag = EXCLUDED.etag,
					problem = '', fetched_at = now(), next_fetch_at = EXCLUDED.next_fetch_at`,
				brokerID, r.key, r.contentType, r.body, r.etag, r.next)
		}
	}
	if batch.Len() == 0 {
		return 0, nil, nil
	}
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return 0, nil, mapErr(err)
	}
	return stored, failed, nil
}

// iconsToCheck reads the icon URLs of a broker's services (at most
// maxIconsPerBroker), what the table knows of them, and how many new
// icons the broker's share of the table has room for.
func (s *Store) iconsToCheck(ctx context.Context, brokerID string) ([]string, map[string]knownIcon, int, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT trim(spec #>> '{externalMetadata,imageUrl}') FROM catalog.service_classes
		WHERE broker_id = $1 AND NOT removed AND jsonb_typeof(spec #> '{externalMetadata,imageUrl}') = 'string'
			AND trim(spec #>> '{externalMetadata,imageUrl}') <> '' LIMIT $2`, brokerID, maxIconsPerBroker)
	if err != nil {
		return nil, nil, 0, mapErr(err)
	}
	urls, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(urls) == 0 {
		return nil, nil, 0, mapErr(err)
	}
	keys := make([][]byte, len(urls))
	for i, u := range urls {
		keys[i] = iconKey(u)
	}
	known := map[string]knownIcon{}
	rows, err = s.pool.Query(ctx, `SELECT url_hash, etag, next_fetch_at, body IS NOT NULL FROM catalog.service_icons
		WHERE broker_id = $1 AND url_hash = ANY($2)`, brokerID, keys)
	if err != nil {
		return nil, nil, 0, mapErr(err)
	}
	var key []byte
	var k knownIcon
	if _, err := pgx.ForEachRow(rows, []any{&key, &k.etag, &k.next, &k.hasBody}, func() error {
		known[string(key)] = k
		return nil
	}); err != nil {
		return nil, nil, 0, mapErr(err)
	}
	var count int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM catalog.service_icons WHERE broker_id = $1`, brokerID).Scan(&count); err != nil {
		return nil, nil, 0, mapErr(err)
	}
	return urls, known, maxIconsPerBroker - count, nil
}

// checkIconURL decodes or fetches one icon and checks it.
func (s *Store) checkIconURL(ctx context.Context, u string, k knownIcon) *iconResult {
	r := &iconResult{key: iconKey(u), next: s.now().Add(iconFresh)}
	var body []byte
	var err error
	switch {
	case strings.HasPrefix(u, "data:"):
		body, err = decodeDataURL(u)
		r.next = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC) // never changes
	case strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://"):
		etag := ""
		if k.hasBody {
			etag = k.etag
		}
		body, r.etag, r.unchanged, err = s.fetchIcon(ctx, u, etag)
	default:
		err = errors.New("is not an http, https or data: URL")
	}
	if err == nil && !r.unchanged {
		r.contentType, r.body, err = checkIcon(body)
	}
	if err != nil {
		r.problem, r.next = redactIconURL(u)+": "+err.Error(), s.now().Add(iconRetry)
	}
	return r
}

// redactIconURL names an icon in logs: a data: URI by its start only, a
// URL without its query (which may carry a token).
func redactIconURL(u string) string {
	if strings.HasPrefix(u, "data:") {
		head, _, _ := strings.Cut(u, ",")
		return head + ",…"
	}
	if p, err := url.Parse(u); err == nil {
		p.RawQuery, p.User, p.Fragment = "", nil, ""
		return p.String()
	}
	return "an icon URL"
}

// decodeDataURL decodes a data: URI's bytes (RFC 2397), base64 or
// percent-encoded.
func decodeDataURL(u string) ([]byte, error) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok {
		return nil, errors.New("is a data: URI without data")
	}
	var body []byte
	var err error
	if strings.HasSuffix(strings.ToLower(meta), ";base64") {
		body, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(data), ""))
		if err != nil {
			body, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.Join(strings.Fields(data), ""), "="))
		}
	} else {
		var s string
		s, err = url.PathUnescape(data)
		body = []byte(s)
	}
	if err != nil {
		return nil, errors.New("is a data: URI that cannot be decoded")
	}
	if len(body) > maxIconBytes {
		return nil, fmt.Errorf("is larger than %d KiB", maxIconBytes>>10)
	}
	return body, nil
}

// fetchIcon asks for an icon, with If-None-Match when one is stored.
func (s *Store) fetchIcon(ctx context.Context, u, etag string) (body []byte, newETag string, unchanged bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, iconFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", false, errors.New("is not a URL that can be fetched")
	}
	req.Header.Set("Accept", "image/png, image/webp, image/svg+xml, image/jpeg, image/gif")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	res, err := s.iconClient().Do(req)
	if err != nil {
		return nil, "", false, fmt.Errorf("fetch: %w", unwrapURLError(err))
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusNotModified && etag != "":
		return nil, etag, true, nil
	case res.StatusCode != http.StatusOK:
		return nil, "", false, fmt.Errorf("fetch: answered %d", res.StatusCode)
	}
	body, err = io.ReadAll(io.LimitReader(res.Body, maxIconBytes+1))
	if err != nil {
		return nil, "", false, fmt.Errorf("fetch: %w", err)
	}
	if len(body) > maxIconBytes {
		return nil, "", false, fmt.Errorf("is larger than %d KiB", maxIconBytes>>10)
	}
	newETag = res.Header.Get("ETag")
	if len(newETag) > 256 {
		newETag = ""
	}
	return body, newETag, false, nil
}

// unwrapURLError drops net/http's "Get <url>:" prefix (the URL may carry a
// token, and the log names the icon already).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// checkIcon tells what an icon is from its bytes, not from what it was
// served as: a raster image of a bounded size, or an SVG image made safe.
func checkIcon(body []byte) (string, []byte, error) {
	ctype := http.DetectContentType(body)
	switch ctype {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		cfg, _, err := image.DecodeConfig(bytes.NewReader(body))
		if err != nil {
			return "", nil, fmt.Errorf("is not a valid %s image", strings.TrimPrefix(ctype, "image/"))
		}
		if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxIconSide || cfg.Height > maxIconSide {
			return "", nil, fmt.Errorf("is %d×%d pixels; icons are at most %d×%d", cfg.Width, cfg.Height, maxIconSide, maxIconSide)
		}
		return ctype, body, nil
	}
	if clean, err := svgsafe.Clean(body); err == nil {
		return "image/svg+xml", clean, nil
	}
	return "", nil, errors.New("is not a PNG, JPEG, GIF, WebP or SVG image")
}

// iconClient is the HTTP client of icon fetches: every connection checked
// against the broker egress policy (as catalogue fetches are), no proxy
// (the policy would see only its address), at most three redirects.
func (s *Store) iconClient() *http.Client {
	s.iconOnce.Do(func() {
		egress := s.egress
		if egress == nil {
			// What osb.New allows when given no policy.
			egress = &osb.Egress{AllowLoopback: true}
		}
		dialer := &net.Dialer{Timeout: iconFetchTimeout, Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			ip, err := netip.ParseAddr(host)
			if err != nil {
				return fmt.Errorf("broker egress policy: %q is not an address", host)
			}
			return egress.Check(ip)
		}}
		transport := &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: iconFetchTimeout,
			ResponseHeaderTimeout: iconFetchTimeout, MaxResponseHeaderBytes: 64 << 10, MaxIdleConnsPerHost: iconFetchers,
			IdleConnTimeout: 30 * time.Second, ForceAttemptHTTP2: true}
		s.icons = &http.Client{Transport: transport, Timeout: iconFetchTimeout,
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 3 {
					return errors.New("more than 3 redirects")
				}
				if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
					return errors.New("redirected to neither http nor https")
				}
				return nil
			}}
	})
	return s.icons
}

// iconFetcher is the state of a store's icon fetches.
type iconFetcher struct {
	iconOnce sync.Once
	icons    *http.Client
}
