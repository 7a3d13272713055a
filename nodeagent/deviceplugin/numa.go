package deviceplugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// numaNodes returns the NUMA locality of a device node from sysfs: the
// numa_node file of its device, or of the nearest ancestor that has one
// (a PCI function for a GPU's render node, the USB controller for a serial
// adapter), reached through <sysfs>/dev/{char,block}/MAJOR:MINOR. Regular
// files, virtual devices and a numa_node of -1 have no locality, which the
// kubelet reads as "any node".
func numaNodes(sysfs string, fi os.FileInfo) []int64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	var kind string
	switch fi.Mode().Type() {
	case os.ModeDevice | os.ModeCharDevice:
		kind = "char"
	case os.ModeDevice:
		kind = "block"
	default:
		return nil
	}
	root, err := filepath.EvalSymlinks(sysfs)
	if err != nil {
		return nil
	}
	rdev := uint64(st.Rdev) //nolint:unconvert // Rdev is narrower on some platforms
	dir, err := filepath.EvalSymlinks(filepath.Join(root, "dev", kind, fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))))
	if err != nil {
		return nil
	}
	devices := filepath.Join(root, "devices") + string(filepath.Separator)
	for ; strings.HasPrefix(dir, devices); dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "numa_node"))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n < 0 {
			return nil
		}
		return []int64{n}
	}
	return nil
}
