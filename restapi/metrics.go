package restapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/bindery-dev/bindery/catalog"
	"github.com/bindery-dev/bindery/internal/serve"
)

// quotaCollector exports every namespace's instances, bindings and brokers
// and the limits in force on them (catalog.Store.QuotaUsage), read from the
// database at each scrape: the counts are the catalog's, whichever
// replica answers.
type quotaCollector struct {
	store *catalog.Store
	log   *slog.Logger
}

// NewQuotaCollector returns the collector of the namespaces' usage.
func NewQuotaCollector(store *catalog.Store, log *slog.Logger) prometheus.Collector {
	return quotaCollector{store: store, log: log}
}

var (
	instancesDesc = prometheus.NewDesc("bindery_namespace_instances", "Instances of the namespace, those being deleted included.", []string{"namespace"}, nil)
	bindingsDesc  = prometheus.NewDesc("bindery_namespace_bindings", "Bindings of the namespace, those being deleted included.", []string{"namespace"}, nil)
	instancesLim  = prometheus.NewDesc("bindery_namespace_instances_limit",
		"The strictest limit on the namespace's instances; source is namespace, default or ResourceQuota/NAME.", []string{"namespace", "source"}, nil)
	bindingsLim = prometheus.NewDesc("bindery_namespace_bindings_limit",
		"The strictest limit on the namespace's bindings; source is namespace, default or ResourceQuota/NAME.", []string{"namespace", "source"}, nil)
	brokersDesc = prometheus.NewDesc("bindery_namespace_brokers", "Brokers of the namespace's own.", []string{"namespace"}, nil)
	brokersLim  = prometheus.NewDesc("bindery_namespace_brokers_limit",
		"The strictest limit on the namespace's brokers; source is server (--max-brokers-per-namespace) or ResourceQuota/NAME.", []string{"namespace", "source"}, nil)
)

// scrapeTimeout bounds the read of the usage a scrape makes.
const scrapeTimeout = 5 * time.Second

func (quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{instancesDesc, bindingsDesc, brokersDesc, instancesLim, bindingsLim, brokersLim} {
		ch <- d
	}
}

func (q quotaCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	usage, err := q.store.QuotaUsage(ctx)
	if err != nil {
		q.log.Warn("read the namespaces' usage for metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(instancesDesc, err)
		return
	}
	for _, u := range usage {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(u.Instances.Used), u.Namespace)
		ch <- prometheus.MustNewConstMetric(bindingsDesc, prometheus.GaugeValue, float64(u.Bindings.Used), u.Namespace)
		if l := u.Instances.Limit; l != nil {
			ch <- prometheus.MustNewConstMetric(instancesLim, prometheus.GaugeValue, float64(*l), u.Namespace, u.Instances.Source)
		}
		if l := u.Bindings.Limit; l != nil {
			ch <- prometheus.MustNewConstMetric(bindingsLim, prometheus.GaugeValue, float64(*l), u.Namespace, u.Bindings.Source)
		}
		ch <- prometheus.MustNewConstMetric(brokersDesc, prometheus.GaugeValue, float64(u.Brokers.Used), u.Namespace)
		if l := u.Brokers.Limit; l != nil {
			ch <- prometheus.MustNewConstMetric(brokersLim, prometheus.GaugeValue, float64(*l), u.Namespace, u.Brokers.Source)
		}
	}
}

// relistCollector exports how the catalogue fetches of every broker
// ended (catalog.Store.RelistCounts), read from the database at each
// scrape: the counts are every replica's.
type relistCollector struct {
	store *catalog.Store
	log   *slog.Logger
}

// NewRelistCollector returns the collector of the brokers' fetches.
func NewRelistCollector(store *catalog.Store, log *slog.Logger) prometheus.Collector {
	return relistCollector{store: store, log: log}
}

var relistsDesc = prometheus.NewDesc("bindery_catalog_relists_total",
	"Catalogue fetches of the broker by how they ended: stored, unchanged (the catalogue stored last, left as it was), not_modified (the same, the broker answering 304) or failed.",
	[]string{"namespace", "broker", "outcome"}, nil)

func (relistCollector) Describe(ch chan<- *prometheus.Desc) { ch <- relistsDesc }

func (r relistCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := r.store.RelistCounts(ctx)
	if err != nil {
		r.log.Warn("read the brokers' relists for metrics", "error", err)
		ch <- prometheus.NewInvalidMetric(relistsDesc, err)
		return
	}
	for _, c := range counts {
		for _, o := range [...]struct {
			outcome string
			n       int64
		}{{"stored", c.Stored}, {"unchanged", c.Unchanged}, {"not_modified", c.NotModified}, {"failed", c.Failed}} {
			ch <- prometheus.MustNewConstMetric(relistsDesc, prometheus.CounterValue, float64(o.n), c.Namespace, c.Broker, o.outcome)
		}
	}
}

// MountMetrics serves /metrics on e: reg's metrics to every scrape, and
// private's (the namespaces' usage, NewQuotaCollector, and the brokers'
// fetches, NewRelistCollector) only to a scrape whose bearer token is one
// for all namespaces (serve.SplitMetrics). They name every namespace and
// what it holds, which a token limited to namespaces may not learn
// (GET /namespaces shows it its own), and /metrics is on the address
// tenants reach the API and the web UI at. They also read the database,
// which reg's metrics do not: a scrape without a token is answered during
// an outage of the database.
func (s *Server) MountMetrics(e *echo.Echo, reg *prometheus.Registry, private ...prometheus.Collector) {
	own := prometheus.NewRegistry()
	own.MustRegister(private...)
	e.GET("/metrics", echo.WrapHandler(serve.SplitMetrics(reg, own, s.tokens.ForAllNamespaces)))
}
