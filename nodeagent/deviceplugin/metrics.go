package deviceplugin

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// metrics are the device plugins' Prometheus series, labelled by resource.
type metrics struct {
	devices       *prometheus.GaugeVec
	allocations   *prometheus.CounterVec
	registrations *prometheus.CounterVec
	registered    *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "bindery", Subsystem: "nodeagent", Name: "devices",
			Help: "Devices advertised to the kubelet, by resource and health.",
		}, []string{"resource", "health"}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "bindery", Subsystem: "nodeagent", Name: "allocations_total",
			Help: "Container allocation requests from the kubelet, by resource and result (allocated or rejected).",
		}, []string{"resource", "result"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "bindery", Subsystem: "nodeagent", Name: "registrations_total",
			Help: "Registrations with the kubelet, by resource and result (success or error).",
		}, []string{"resource", "result"}),
		registered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "bindery", Subsystem: "nodeagent", Name: "registered",
			Help: "1 while the device plugin is registered with the current kubelet.",
		}, []string{"resource"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.devices, err = register(reg, m.devices); err != nil {
		return nil, err
	}
	if m.allocations, err = register(reg, m.allocations); err != nil {
		return nil, err
	}
	if m.registrations, err = register(reg, m.registrations); err != nil {
		return nil, err
	}
	if m.registered, err = register(reg, m.registered); err != nil {
		return nil, err
	}
	return m, nil
}

// register adds c to reg, or returns the collector already there, so that
// two managers in one process (as in tests) share their series.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register device plugin metrics: %w", err)
}

func (m *metrics) observeDevices(resource string, s *snapshot) {
	healthy, unhealthy := s.counts()
	m.devices.WithLabelValues(resource, pluginapi.Healthy).Set(float64(healthy))
	m.devices.WithLabelValues(resource, pluginapi.Unhealthy).Set(float64(unhealthy))
}
