package startgc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoot is where the process's cgroups are mounted: in a container,
// its own (a cgroup namespace, or the runtime's bind mounts under cgroup
// v1).
const cgroupRoot = "/sys/fs/cgroup"

// cgroupMemoryLimit is the memory limit of the cgroup mounted at root, in
// bytes: cgroup v2's memory.max, else v1's memory/memory.limit_in_bytes;
// false when there is none ("max", or v1's page-rounded MaxInt64).
func cgroupMemoryLimit(root string) (int64, bool) {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(raw))
		if s == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// softLimit is the memory limit a server sets itself within a cgroup
// limit of limit bytes: nine tenths of it, which leaves the rest to what
// the Go runtime does not count (thread stacks outside the heap, the
// binary's mapped pages), so the collector works harder before the
// kernel's OOM killer would end the process.
func softLimit(limit int64) int64 { return limit / 10 * 9 }
