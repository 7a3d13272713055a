package deviceplugin

import (
	"cmp"
	"maps"
	"slices"
)

// noLocality groups devices without a single NUMA node.
const noLocality = -1

// preferred picks size devices for one container from available, as
// GetPreferredAllocation answers the kubelet's topology manager: every
// must-include device first, then devices on the NUMA nodes those are on,
// then devices without locality (they suit any node), then other nodes —
// the smallest node that holds all that is still needed, else the one
// holding most — and finally devices this plugin does not know as healthy.
// Within a node, devices keep the order in which they were found.
func preferred(snap *snapshot, available, mustInclude []string, size int) []string {
	chosen := make([]string, 0, max(size, len(mustInclude)))
	taken := map[string]bool{}
	affinity := map[int64]bool{}
	for _, id := range mustInclude {
		if taken[id] {
			continue
		}
		taken[id] = true
		chosen = append(chosen, id)
		if e := snap.byID[id]; e != nil && numaKey(e) != noLocality {
			affinity[numaKey(e)] = true
		}
	}
	need := size - len(chosen)
	if need <= 0 {
		return chosen
	}

	groups := map[int64][]string{}
	var rest []string
	for _, id := range available {
		if taken[id] {
			continue
		}
		taken[id] = true
		e := snap.byID[id]
		if e == nil || !e.healthy {
			rest = append(rest, id)
			continue
		}
		groups[numaKey(e)] = append(groups[numaKey(e)], id)
	}
	for _, ids := range groups {
		slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(snap.byID[a].order, snap.byID[b].order) })
	}
	take := func(key int64) {
		ids := groups[key]
		n := min(need, len(ids))
		chosen = append(chosen, ids[:n]...)
		need -= n
		delete(groups, key)
	}

	for _, k := range slices.Sorted(maps.Keys(affinity)) {
		take(k)
	}
	if len(affinity) > 0 {
		take(noLocality)
	}
	for need > 0 {
		k, ok := pickNode(groups, need)
		if !ok {
			break
		}
		take(k)
	}
	take(noLocality)
	n := min(need, len(rest))
	return append(chosen, rest[:n]...)
}

// pickNode chooses the next NUMA node to take devices from: the smallest
// that can supply need on its own (keeping larger nodes whole for larger
// requests), else the one with most devices.
func pickNode(groups map[int64][]string, need int) (int64, bool) {
	best, found, fits := int64(0), false, false
	for _, k := range slices.Sorted(maps.Keys(groups)) {
		if k == noLocality || len(groups[k]) == 0 {
			continue
		}
		n, kFits := len(groups[k]), len(groups[k]) >= need
		switch {
		case !found,
			kFits && !fits,
			kFits && fits && n < len(groups[best]),
			!kFits && !fits && n > len(groups[best]):
			best, found, fits = k, true, kFits
		}
	}
	return best, found
}

// numaKey is a device's single NUMA node, or noLocality.
func numaKey(e *entry) int64 {
	if len(e.numa) == 1 {
		return e.numa[0]
	}
	return noLocality
}
