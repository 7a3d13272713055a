package startgc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryLimit reads limits as cgroup v2 and v1 write them in
// their files, and their absence.
func TestCgroupMemoryLimit(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files map[string]string
		want  int64
		ok    bool
	}{
		"v2 limit":        {map[string]string{"memory.max": "536870912\n"}, 536870912, true},
		"v2 unlimited":    {map[string]string{"memory.max": "max\n"}, 0, false},
		"v1 limit":        {map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 536870912, true},
		"v1 unlimited":    {map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		"v2 before v1":    {map[string]string{"memory.max": "1048576", "memory/memory.limit_in_bytes": "2097152"}, 1048576, true},
		"no cgroup files": {nil, 0, false},
		"garbage":         {map[string]string{"memory.max": "lots"}, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for f, content := range tc.files {
				path := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := cgroupMemoryLimit(root)
			if got != tc.want || ok != tc.ok {
				t.Errorf("cgroupMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if got := softLimit(512 << 20); got != 483183819 {
		t.Errorf("softLimit(512 MiB) = %d, want nine tenths, 483183819", got)
	}
}
