package csi

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The layout of a volume, as the kubelet's AtomicWriter lays out Secret and
// projected volumes (pkg/volume/util/atomic_writer.go): the files live in
// a timestamped directory, dataLink points at it, and each key at the top
// is a symlink through dataLink. A new set of files is written to a new
// directory and dataLink is renamed over the old one, so a reader sees the
// old files or the new ones, never a mix; rename cannot replace a
// non-empty directory, hence the link.
const (
	dataLink    = "..data"
	dataLinkTmp = "..data_tmp"
	// stateFile remembers, across restarts of the agent, the binding whose
	// credentials the volume holds (a rotation's successor once followed).
	// Like dataLink its name starts with "..", so it is no key: readers of
	// servicebinding.io directories skip hidden entries, as they skip the
	// kubelet's.
	stateFile = "..binding"
	// fileMode: the credentials are for the Pod's processes, whatever
	// their user, as a Secret volume's default mode gives them, when
	// the Pod has no fsGroup. With one (the kubelet passes it as the
	// volume_mount_group) they are the group's only: groupFileMode and
	// groupDirMode, owned by root and the group.
	fileMode      = 0o444
	dirMode       = 0o755
	groupFileMode = 0o440
	groupDirMode  = 0o750
	// noGroup: the Pod has no fsGroup.
	noGroup = -1
	// maxKeys and maxKeyBytes bound what one volume holds.
	maxKeys     = 256
	maxKeyBytes = 253
)

// checkKeys refuses keys that cannot be file names of a binding directory.
func checkKeys(data map[string][]byte) error {
	if len(data) > maxKeys {
		return fmt.Errorf("%d credential keys; at most %d fit a volume", len(data), maxKeys)
	}
	var errs []error
	for k := range data {
		switch {
		case k == "" || k == "." || k == "..":
			errs = append(errs, fmt.Errorf("credential key %q is not a file name", k))
		case strings.ContainsAny(k, "/\x00"):
			errs = append(errs, fmt.Errorf("credential key %q holds a slash or a NUL and cannot be a file name", k))
		case strings.HasPrefix(k, ".."):
			errs = append(errs, fmt.Errorf("credential key %q starts with \"..\", which the volume's own entries use", k))
		case len(k) > maxKeyBytes:
			errs = append(errs, fmt.Errorf("credential key %.20q… is longer than %d bytes", k, maxKeyBytes))
		}
	}
	return errors.Join(errs...)
}

// writeFiles makes dir hold data, one file per key, swapping the whole set
// in at once. It writes nothing when dir already holds exactly data, and
// reports whether it changed anything. Keys of an earlier set that data
// lacks disappear. With a group (not noGroup) the files and their
// directory are root's and the group's, and nobody else's.
func writeFiles(dir string, data map[string][]byte, group int) (bool, error) {
	if err := checkKeys(data); err != nil {
		return false, err
	}
	old, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", dataLink, err)
	}
	if old != "" && holds(filepath.Join(dir, old), data) {
		// A swap cut short after its rename (a crash, a failed link) left
		// the keys' links or the earlier set behind: finish it. Both are
		// no-ops on a volume in order.
		if err := linkKeys(dir, data); err != nil {
			return false, err
		}
		return false, removeStale(dir, old)
	}
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, fmt.Errorf("create the new files' directory: %w", err)
	}
	if err := own(ts, dirMode, groupDirMode, group); err != nil {
		_ = os.RemoveAll(ts)
		return false, err
	}
	for k, v := range data {
		f := filepath.Join(ts, k)
		if err := os.WriteFile(f, v, 0o400); err != nil {
			_ = os.RemoveAll(ts)
			return false, fmt.Errorf("write %s: %w", k, err)
		}
		if err := own(f, fileMode, groupFileMode, group); err != nil {
			_ = os.RemoveAll(ts)
			return false, err
		}
	}
	tmp := filepath.Join(dir, dataLinkTmp)
	_ = os.Remove(tmp) // a crash between symlink and rename left it
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		_ = os.RemoveAll(ts)
		return false, fmt.Errorf("link the new files: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		_ = os.RemoveAll(ts)
		return false, fmt.Errorf("swap the new files in: %w", err)
	}
	if err := linkKeys(dir, data); err != nil {
		return true, err
	}
	return true, removeStale(dir, filepath.Base(ts))
}

// own gives path mode, or, with a group, groupMode and root:group.
func own(path string, mode, groupMode os.FileMode, group int) error {
	if group != noGroup {
		if err := os.Chown(path, 0, group); err != nil {
			return fmt.Errorf("give %s to group %d: %w", filepath.Base(path), group, err)
		}
		mode = groupMode
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("set the mode of %s: %w", filepath.Base(path), err)
	}
	return nil
}

// holds reports whether dir has exactly the files of data.
func holds(dir string, data map[string][]byte) bool {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != len(data) {
		return false
	}
	for _, e := range entries {
		want, ok := data[e.Name()]
		if !ok {
			return false
		}
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || !bytes.Equal(got, want) {
			return false
		}
	}
	return true
}

// linkKeys makes every key a symlink through dataLink, and removes the
// links of keys no longer there. A key that appears is visible only once
// the new set is in place, a key that goes disappears after it.
func linkKeys(dir string, data map[string][]byte) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read the volume: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			continue
		}
		if _, ok := data[name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		link, want := filepath.Join(dir, k), filepath.Join(dataLink, k)
		if got, err := os.Readlink(link); err == nil && got == want {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(want, link); err != nil {
			return fmt.Errorf("link %s: %w", k, err)
		}
	}
	return nil
}

// removeStale deletes the timestamped directories other than keep.
func removeStale(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read the volume: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && strings.HasPrefix(n, "..") && n != keep {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, n)))
		}
	}
	return errors.Join(errs...)
}

// readState returns the binding the volume last held, "" when unknown.
func readState(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// writeState records the binding the volume holds, atomically.
func writeState(dir, binding string) error {
	if readState(dir) == binding {
		return nil
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, []byte(binding+"\n"), fileMode); err != nil {
		return fmt.Errorf("record the volume's binding: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("record the volume's binding: %w", err)
	}
	return nil
}
