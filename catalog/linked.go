package catalog

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// GetBindingLinked reads a binding and the instance it is linked to, in
// one round trip and without a transaction: what the engine reads first
// when it works on a binding, and all it needs of LinkBinding for every
// binding but those recorded before their instance. err is the binding's
// read; when the binding is not linked, in is nil and inErr ErrNotFound:
// LinkBinding then links it, or says why it cannot.
func (s *Store) GetBindingLinked(ctx context.Context, id string) (b *Binding, in *Instance, inErr, err error) {
	if !IsID(id) {
		return nil, nil, nil, ErrNotFound
	}
	batch := &pgx.Batch{}
	batch.Queue(`SELECT `+columns(KindBinding)+` FROM catalog.bindings WHERE id = $1`, id)
	batch.Queue(`SELECT `+columns(KindInstance)+` FROM catalog.instances WHERE id = (SELECT instance_id FROM catalog.bindings WHERE id = $1)`, id)
	br := s.pool.SendBatch(ctx, batch)
	defer br.Close()
	b, in = new(Binding), new(Instance)
	if err := scanInto(br.QueryRow(), b); err != nil {
		return nil, nil, nil, err
	}
	if inErr = scanInto(br.QueryRow(), in); inErr != nil {
		in = nil
	}
	return b, in, inErr, nil
}
