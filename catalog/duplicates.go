package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/bindery-dev/bindery/internal/osb"
)

// errDuplicateOffer is storeCatalog's conflict: a service or plan of the
// catalogue is already offered, in the broker's scope, by another broker.
// Relist names them once the transaction is over (duplicateOffer).
var errDuplicateOffer = errors.New("a service or plan of the catalogue is offered by another broker")

// duplicateOffer names the first service or plan of cat that another
// broker of b's scope already offers, and that broker: services and plans
// are named by their OSB ids, which must be unique among the brokers of a
// scope.
func (s *Store) duplicateOffer(ctx context.Context, b *Broker, cat *osb.Catalogue) error {
	what := map[string]string{}
	var classes, plans []string
	for i := range cat.Len() {
		svc, err := cat.Service(i)
		if err != nil {
			continue
		}
		class := classOf(b, svc)
		classes = append(classes, class.Name)
		what["c"+class.Name] = fmt.Sprintf("service %q (id %s)", svc.Name, svc.ID)
		for _, p := range svc.Plans {
			plan := planOf(b, class, p)
			plans = append(plans, plan.Name)
			what["p"+plan.Name] = fmt.Sprintf("plan %q (id %s) of service %q", p.Name, p.ID, svc.Name)
		}
	}
	var kind, name, other string
	var removed bool
	err := s.pool.QueryRow(ctx, `
		(SELECT 'c', c.name, br.name, c.removed FROM catalog.service_classes c JOIN catalog.brokers br ON br.id = c.broker_id
			WHERE c.namespace = $1 AND c.name = ANY($2) AND c.broker_id <> $4 LIMIT 1)
		UNION ALL
		(SELECT 'p', p.name, br.name, p.removed FROM catalog.service_plans p JOIN catalog.brokers br ON br.id = p.broker_id
			WHERE p.namespace = $1 AND p.name = ANY($3) AND p.broker_id <> $4 LIMIT 1)
		LIMIT 1`, b.Namespace, classes, plans, b.ID).Scan(&kind, &name, &other, &removed)
	if err != nil {
		return &ConflictError{Message: "A service or plan of its catalogue has the id of one another broker offers: OSB ids must be unique among brokers."}
	}
	if removed {
		// The other broker dropped it, but its row stays for what holds
		// it (instances, a visibility or a quota set on it).
		return &ConflictError{Message: fmt.Sprintf("Its %s has the id of one broker %q no longer offers but Bindery keeps, for instances or settings that still hold it: OSB ids must be unique among brokers, so it can be offered again once nothing holds the other (or by another id).",
			what[kind+name], other)}
	}
	return &ConflictError{Message: fmt.Sprintf("Its %s is already offered by broker %q: OSB ids must be unique among brokers, so one of the two must change it (or deregister the other).",
		what[kind+name], other)}
}
