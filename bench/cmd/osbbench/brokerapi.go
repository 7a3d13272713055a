package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/pivotal-cf/brokerapi/v12"
	"github.com/pivotal-cf/brokerapi/v12/domain"
)

// errNotMeasured answers every OSB call of the peer broker except the
// catalogue, which is all this program measures on it.
var errNotMeasured = errors.New("this peer serves only the catalogue: the benchmark measures nothing else on it")

// catalogBroker is a brokerapi ServiceBroker that serves a fixed catalogue.
type catalogBroker struct {
	services []domain.Service
}

var _ domain.ServiceBroker = catalogBroker{}

// newCatalogBroker decodes a /v2/catalog response body into brokerapi's
// types, so that the peer serves the same catalogue as Bindery.
func newCatalogBroker(body []byte) (catalogBroker, error) {
	var catalog struct {
		Services []domain.Service `json:"services"`
	}
	if err := json.Unmarshal(body, &catalog); err != nil {
		return catalogBroker{}, fmt.Errorf("decode catalog for brokerapi: %w", err)
	}
	if len(catalog.Services) == 0 {
		return catalogBroker{}, errors.New("decode catalog for brokerapi: no services")
	}
	return catalogBroker{services: catalog.Services}, nil
}

// brokerapiHandler is the peer's OSB API with HTTP basic auth.
func brokerapiHandler(b catalogBroker, username, password string) http.Handler {
	log := slog.New(slog.DiscardHandler)
	return brokerapi.New(b, log, brokerapi.BrokerCredentials{Username: username, Password: password})
}

// Services returns the catalogue.
func (b catalogBroker) Services(context.Context) ([]domain.Service, error) {
	return b.services, nil
}

// Provision is not measured.
func (catalogBroker) Provision(context.Context, string, domain.ProvisionDetails, bool) (domain.ProvisionedServiceSpec, error) {
	return domain.ProvisionedServiceSpec{}, errNotMeasured
}

// Deprovision is not measured.
func (catalogBroker) Deprovision(context.Context, string, domain.DeprovisionDetails, bool) (domain.DeprovisionServiceSpec, error) {
	return domain.DeprovisionServiceSpec{}, errNotMeasured
}

// GetInstance is not measured.
func (catalogBroker) GetInstance(context.Context, string, domain.FetchInstanceDetails) (domain.GetInstanceDetailsSpec, error) {
	return domain.GetInstanceDetailsSpec{}, errNotMeasured
}

// Update is not measured.
func (catalogBroker) Update(context.Context, string, domain.UpdateDetails, bool) (domain.UpdateServiceSpec, error) {
	return domain.UpdateServiceSpec{}, errNotMeasured
}

// LastOperation is not measured.
func (catalogBroker) LastOperation(context.Context, string, domain.PollDetails) (domain.LastOperation, error) {
	return domain.LastOperation{}, errNotMeasured
}

// Bind is not measured.
func (catalogBroker) Bind(context.Context, string, string, domain.BindDetails, bool) (domain.Binding, error) {
	return domain.Binding{}, errNotMeasured
}

// Unbind is not measured.
func (catalogBroker) Unbind(context.Context, string, string, domain.UnbindDetails, bool) (domain.UnbindSpec, error) {
	return domain.UnbindSpec{}, errNotMeasured
}

// GetBinding is not measured.
func (catalogBroker) GetBinding(context.Context, string, string, domain.FetchBindingDetails) (domain.GetBindingSpec, error) {
	return domain.GetBindingSpec{}, errNotMeasured
}

// LastBindingOperation is not measured.
func (catalogBroker) LastBindingOperation(context.Context, string, string, domain.PollDetails) (domain.LastOperation, error) {
	return domain.LastOperation{}, errNotMeasured
}
