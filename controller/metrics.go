package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

type metrics struct {
	reconciles  *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	brokerCalls *prometheus.CounterVec
	pollErrors  *prometheus.CounterVec
	retries     *prometheus.CounterVec
	spent       [parts]prometheus.Counter
	feed        prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bindery_controller_reconciles_total", Help: "Reconciles by kind and result.",
		}, []string{"kind", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bindery_controller_reconcile_duration_seconds", Help: "Reconcile latency by kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"kind"}),
		brokerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bindery_controller_broker_calls_total", Help: "OSB requests by verb and outcome.",
		}, []string{"verb", "outcome"}),
		pollErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bindery_controller_poll_errors_total", Help: "Polls of an asynchronous operation that the broker answered with an error, or not at all, by kind and operation.",
		}, []string{"kind", "operation"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bindery_controller_retries_scheduled_total", Help: "Failed broker calls scheduled for another attempt with backoff, by operation.",
		}, []string{"operation"}),
	}
	m.feed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bindery_controller_feed_revision", Help: "The last catalog revision the engine has read from the change feed: behind the catalog's, the engine is catching up.",
	})
	reg.MustRegister(m.reconciles, m.duration, m.brokerCalls, m.pollErrors, m.retries, m.feed)
	m.spent = newSpent(reg)
	return m
}

// newBucket is the overall retry budget of the work queue: 50 retries a
// second, bursts of 300, on top of each object's exponential backoff.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(50), 300) }
