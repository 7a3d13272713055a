package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/bindery-dev/bindery/internal/keyring"
	"github.com/bindery-dev/bindery/internal/pgstatus"
	"github.com/bindery-dev/bindery/internal/serve"
	"github.com/bindery-dev/bindery/migrations"
)

// Config is everything a Broker needs.
type Config struct {
	Pool    *pgxpool.Pool
	Catalog *Catalog
	// Drivers maps a service's `driver` name to its Driver.
	Drivers map[string]Driver
	// Keys seal binding credentials at rest.
	Keys *keyring.Keyring
	// Auth is how platforms authenticate; at least one way must be set.
	Auth     Auth
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// OperationTimeout bounds one attempt of one operation. An operation
	// whose process died is resumed once this (plus a margin) has passed.
	// Default 5 minutes.
	OperationTimeout time.Duration
	// OperationDeadline bounds an operation in all, over every attempt:
	// past it, the operation ends as failed. A plan's
	// maximum_polling_duration shortens it. Default 45 minutes, inside
	// the hour platforms poll for by default.
	OperationDeadline time.Duration
	// MaxAttempts is how many attempts an operation gets before it ends
	// as failed; 0 leaves River's default (25).
	MaxAttempts int
	// Workers is how many operations run at once in this process. Default 10.
	Workers int
	// Ready are readiness checks besides the broker's database, for
	// /readyz.
	Ready []serve.Check
	// ShutdownGrace is how long Run lets running operations go on once
	// its context ends. Default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// OperationRetention is how long finished operations are kept (the
	// newest of a live instance or binding longer). Default
	// DefaultOperationRetention.
	OperationRetention time.Duration
}

// PlanConfigValidator is implemented by drivers that can check a plan's
// `config` when the catalogue is loaded, so a bad catalogue fails at start.
type PlanConfigValidator interface {
	ValidatePlanConfig(config []byte) error
}

// Broker is an OSB server over its PostgreSQL records.
type Broker struct {
	pool       *pgxpool.Pool
	catalog    *Catalog
	drivers    map[string]Driver
	keys       *keyring.Keyring
	auth       Auth
	log        *slog.Logger
	river      *river.Client[pgx.Tx]
	opTimeout  time.Duration
	opDeadline time.Duration
	// opRetention is Config.OperationRetention, for PruneOperations.
	opRetention time.Duration
	// shutdownGrace is Config.ShutdownGrace, for Run.
	shutdownGrace time.Duration
	metrics       *metrics
	handler       http.Handler
}

// validate reports every problem of the configuration at once: what is
// missing, and services whose driver is not there or refuses a plan's
// config.
func (cfg *Config) validate() error {
	var errs []error
	if cfg.Pool == nil {
		errs = append(errs, errors.New("broker: a database pool is required"))
	}
	if cfg.Catalog == nil {
		errs = append(errs, errors.New("broker: a catalog is required"))
	}
	if cfg.Keys == nil {
		errs = append(errs, fmt.Errorf("broker: %w", keyring.ErrNoKey))
	}
	if err := cfg.Auth.validate(); err != nil {
		errs = append(errs, err)
	}
	if cfg.Catalog == nil {
		return errors.Join(errs...)
	}
	for i, s := range cfg.Catalog.Services {
		d, ok := cfg.Drivers[s.Driver]
		if !ok {
			errs = append(errs, fmt.Errorf("catalog: services[%d].driver: no driver named %q", i, s.Driver))
			continue
		}
		v, ok := d.(PlanConfigValidator)
		if !ok {
			continue
		}
		for j, p := range s.Plans {
			if err := v.ValidatePlanConfig(p.Config); err != nil {
				errs = append(errs, fmt.Errorf("catalog: services[%d].plans[%d].bindery.config: %w", i, j, err))
			}
		}
	}
	return errors.Join(errs...)
}

// New checks the configuration, stores the catalogue in the broker's
// schema and prepares the job engine. Call Start to run operations.
func New(ctx context.Context, cfg Config) (*Broker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.OperationTimeout <= 0 {
		cfg.OperationTimeout = 5 * time.Minute
	}
	if cfg.OperationDeadline <= 0 {
		cfg.OperationDeadline = DefaultOperationDeadline
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.OperationRetention <= 0 {
		cfg.OperationRetention = DefaultOperationRetention
	}
	b := &Broker{
		pool:          cfg.Pool,
		catalog:       cfg.Catalog,
		drivers:       cfg.Drivers,
		keys:          cfg.Keys,
		auth:          cfg.Auth,
		log:           cfg.Logger,
		opTimeout:     cfg.OperationTimeout,
		opDeadline:    cfg.OperationDeadline,
		opRetention:   cfg.OperationRetention,
		shutdownGrace: cfg.ShutdownGrace,
		metrics:       newMetrics(cfg.Registry),
	}
	if err := cfg.Keys.VerifyCanary(ctx, "broker", canaryStore{cfg.Pool}); err != nil {
		return nil, err
	}
	body, etag := cfg.Catalog.Body()
	if err := saveCatalog(ctx, b.pool, body, etag); err != nil {
		return nil, fmt.Errorf("store catalog: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &operationWorker{b: b})
	river.AddWorker(workers, &pruneWorker{b: b})
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		Schema:               migrations.Broker,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:              workers,
		JobTimeout:           cfg.OperationTimeout,
		MaxAttempts:          cfg.MaxAttempts,
		RescueStuckJobsAfter: b.rescueAfter(),
		PeriodicJobs:         []*river.PeriodicJob{pruneJob()},
		Logger:               cfg.Logger.With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("job engine: %w", err)
	}
	b.river = client
	b.handler = b.routes(cfg.Registry, cfg.Ready)
	return b, nil
}

// DefaultOperationDeadline is how long an operation may take in all
// unless Config.OperationDeadline says otherwise.
const DefaultOperationDeadline = 45 * time.Minute

// rescueAfter is when an operation whose process died is taken up again:
// past its timeout, so a live attempt has always given up by then.
func (b *Broker) rescueAfter() time.Duration { return b.opTimeout + 5*time.Second }

// Start runs the job engine: queued operations, and operations left by a
// process that died, are worked from now on.
func (b *Broker) Start(ctx context.Context) error { return b.river.Start(ctx) }

// Stop lets running operations finish until ctx ends, then cancels those
// still running, waiting a second more at most; they stay in progress and
// are resumed by the next broker process (or another replica).
func (b *Broker) Stop(ctx context.Context) error {
	err := b.river.Stop(ctx)
	if ctx.Err() == nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	return b.river.StopAndCancel(cctx)
}

// Handler serves the OSB API under /v2 and the probes and metrics.
func (b *Broker) Handler() http.Handler { return b.handler }

func (b *Broker) routes(reg *prometheus.Registry, ready []serve.Check) http.Handler {
	e := serve.NewEcho(b.log, reg, append(slices.Clip(ready), func(ctx context.Context) error { return b.pool.Ping(ctx) })...)
	e.HTTPErrorHandler = b.errorHandler
	v2 := e.Group("/v2", b.metrics.middleware, serve.Recover(b.log), requestIdentity, b.auth.middleware, apiVersion, osbParams, originatingIdentity)
	v2.GET("/catalog", b.getCatalog)
	v2.PUT("/service_instances/:instance_id", b.provision)
	v2.PATCH("/service_instances/:instance_id", b.update)
	v2.GET("/service_instances/:instance_id", b.getInstance)
	v2.DELETE("/service_instances/:instance_id", b.deprovision)
	v2.GET("/service_instances/:instance_id/last_operation", b.instanceLastOperation)
	v2.PUT("/service_instances/:instance_id/service_bindings/:binding_id", b.bind)
	v2.GET("/service_instances/:instance_id/service_bindings/:binding_id", b.getBinding)
	v2.DELETE("/service_instances/:instance_id/service_bindings/:binding_id", b.unbind)
	v2.GET("/service_instances/:instance_id/service_bindings/:binding_id/last_operation", b.bindingLastOperation)
	return e
}

// errorHandler turns every error of a request into an OSB error body; the
// details of unexpected errors go to the log, never to the client.
func (b *Broker) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if e, ok := asError(err); ok {
		_ = c.JSON(e.Status, e.body())
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if s, ok := he.Message.(string); ok {
			msg = s
		}
		_ = c.JSON(he.Code, map[string]any{"error": http.StatusText(he.Code), "description": msg})
		return
	}
	if pgstatus.Unavailable(err) {
		b.log.WarnContext(c.Request().Context(), "database unavailable", "method", c.Request().Method, "path", c.Path(), "error", err)
		c.Response().Header().Set("Retry-After", "5")
		_ = c.JSON(http.StatusServiceUnavailable, map[string]any{
			"error": "ServiceUnavailable", "description": "The broker's database cannot be reached right now; try again in 5 seconds.",
		})
		return
	}
	b.log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method, "path", c.Path(), "error", err)
	_ = c.JSON(http.StatusInternalServerError, map[string]any{
		"error": "InternalError", "description": "The broker could not complete the request; it is logged on the broker.",
	})
}

func (b *Broker) getCatalog(c echo.Context) error {
	body, etag := b.catalog.Body()
	h := c.Response().Header()
	h.Set("ETag", etag)
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && etagMatch(inm, etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
}

// newID returns a random identifier for an operation.
func newID(prefix string) string {
	raw := make([]byte, 12)
	_, _ = rand.Read(raw)
	return prefix + "-" + hex.EncodeToString(raw)
}
