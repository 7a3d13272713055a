package catalog

import (
	"context"

	"github.com/google/uuid"
)

// LinkedInstance reads the instance a binding is linked to, in one round
// trip and without a transaction: what the engine needs of LinkBinding for
// every binding but those recorded before their instance. A binding that
// is not linked (or does not exist) is ErrNotFound; LinkBinding then
// links it, or says why it cannot.
func (s *Store) LinkedInstance(ctx context.Context, bindingID string) (*Instance, error) {
	if _, err := uuid.Parse(bindingID); err != nil {
		return nil, ErrNotFound
	}
	return getBy[Instance](ctx, s.pool, `id = (SELECT instance_id FROM catalog.bindings WHERE id = $1)`, bindingID)
}
