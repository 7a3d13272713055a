package csi

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the driver's Prometheus series.
type metrics struct {
	publishes      *prometheus.CounterVec
	unpublishes    *prometheus.CounterVec
	refreshes      *prometheus.CounterVec
	writes         prometheus.Counter
	volumes        prometheus.Gauge
	registered     prometheus.Gauge
	publishSeconds prometheus.Histogram
	fetchSeconds   prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "bindery", Subsystem: "csi", Name: name, Help: help}
	}
	buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &metrics{
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("publishes_total",
			"NodePublishVolume calls (first mounts and the kubelet's republishes), by result: ok or the gRPC code.")), []string{"result"}),
		unpublishes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("unpublishes_total",
			"NodeUnpublishVolume calls, by result (ok or error).")), []string{"result"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("refreshes_total",
			"The driver's own reads of mounted credentials, by result: ok or the gRPC code.")), []string{"result"}),
		writes: prometheus.NewCounter(prometheus.CounterOpts(opts("writes_total",
			"Sets of credential files swapped into a volume: first mounts and changes (rotations).",
		))),
		volumes:    prometheus.NewGauge(prometheus.GaugeOpts(opts("volumes", "Volumes published on this node since the agent started."))),
		registered: prometheus.NewGauge(prometheus.GaugeOpts(opts("registered", "1 while the kubelet has the driver registered."))),
		publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "bindery", Subsystem: "csi", Name: "publish_seconds",
			Help: "How long a successful NodePublishVolume took.", Buckets: buckets}),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "bindery", Subsystem: "csi", Name: "fetch_seconds",
			Help: "How long reading a volume's credentials from the API server took, rotations followed included.", Buckets: buckets}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.publishes, m.unpublishes, m.refreshes, m.writes, m.volumes, m.registered, m.publishSeconds, m.fetchSeconds} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, fmt.Errorf("register CSI driver metrics: %w", err)
			}
		}
	}
	return m, nil
}
