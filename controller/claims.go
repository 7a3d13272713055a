package controller

import (
	"context"
	"sync"
	"time"

	"github.com/bindery-dev/bindery/catalog"
)

// How replicas share the objects. Each object belongs to one of
// catalog.ClaimShards shards (by its key), and an engine works on an
// object only while it owns its shard: a session advisory lock it takes
// the first time it needs the shard and holds until it stops (or its
// session breaks). Every replica follows the whole feed; an object of a
// shard another replica owns is left to that one, and its key kept, a
// few per shard. Every claimProbe the engine tries those shards again: it
// takes over the shards of a replica that is gone (its session ended with
// it), with what was left to it — the unsettled objects of the shards and
// the keys kept.

// claimProbe is how often the engine checks its claims' session and tries
// the shards another replica owned.
const claimProbe = 2 * time.Second

// refusedPerShard bounds the keys kept per shard another replica owns.
const refusedPerShard = 1024

// refusedKeys are, by shard, keys this engine left to the replica that
// owned their shard.
type refusedKeys struct {
	mu sync.Mutex
	m  map[int]map[objectKey]struct{}
}

func (r *refusedKeys) add(key objectKey) {
	shard := catalog.ClaimShard(key.String())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[int]map[objectKey]struct{}{}
	}
	keys := r.m[shard]
	if keys == nil || len(keys) >= refusedPerShard {
		// The oldest are likely done by now: the owner follows the
		// same feed.
		keys = map[objectKey]struct{}{}
		r.m[shard] = keys
	}
	keys[key] = struct{}{}
}

// take removes and returns the keys kept for shard.
func (r *refusedKeys) take(shard int) []objectKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := r.m[shard]
	delete(r.m, shard)
	out := make([]objectKey, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	return out
}

// probeClaims probes the claims every claimProbe until ctx ends, and
// takes over what the shards it took had waiting.
func (c *Controller) probeClaims(ctx context.Context) {
	t := time.NewTicker(claimProbe)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		taken, err := c.claims.Probe(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("probe the claims", "error", err)
			}
			continue
		}
		if len(taken) > 0 {
			if err := c.takeOver(ctx, taken); err != nil && ctx.Err() == nil {
				c.log.Warn("take over shards", "shards", taken, "error", err)
			}
		}
	}
}

// takeOver enqueues what the shards taken had waiting: their unsettled
// objects and the keys this engine left to their former owner.
func (c *Controller) takeOver(ctx context.Context, shards []int) error {
	c.log.Info("took over shards of the objects from a replica that is gone", "shards", shards)
	in := map[int]bool{}
	for _, s := range shards {
		in[s] = true
		for _, k := range c.refused.take(s) {
			c.queue.Add(k)
		}
	}
	instances, bindings, err := c.store.Unsettled(ctx)
	if err != nil {
		return err
	}
	for _, keys := range [][]objectKey{keysOf(instances, instanceKey), keysOf(bindings, bindingKey)} {
		for _, k := range keys {
			if in[catalog.ClaimShard(k.String())] {
				c.queue.Add(k)
			}
		}
	}
	return nil
}

func keysOf(keys []catalog.Key, key func(namespace, id string) objectKey) []objectKey {
	out := make([]objectKey, len(keys))
	for i, k := range keys {
		out[i] = key(k.Namespace, k.ID)
	}
	return out
}
