package csi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tmpfsSize bounds the memory one volume may take: credentials are a few
// kilobytes, and two sets live side by side while they are swapped.
const tmpfsSize = "4m"

// mounted reports whether target is a mount point of a tmpfs: what
// mountTmpfs left there. A directory on the parent's file system is not.
func mounted(target string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(target, &st); err != nil {
		return false, err
	}
	if err := unix.Stat(filepath.Dir(target), &parent); err != nil {
		return false, err
	}
	if st.Dev == parent.Dev {
		return false, nil
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return false, err
	}
	return sfs.Type == unix.TMPFS_MAGIC, nil
}

// mountTmpfs creates target (its parent must exist, as the kubelet makes
// it) and mounts a tmpfs there: the credentials live in memory only and
// go with the mount. Nothing on it may run or be a device. With a group
// (not noGroup) its root is root's and the group's only.
func mountTmpfs(target string, group int) error {
	if err := os.Mkdir(target, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create the target path: %w", err)
	}
	opts := fmt.Sprintf("mode=%04o,size=%s", dirMode, tmpfsSize)
	if group != noGroup {
		opts = fmt.Sprintf("mode=%04o,uid=0,gid=%d,size=%s", groupDirMode, group, tmpfsSize)
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount a tmpfs at the target path: %w", err)
	}
	return nil
}

// unmountAndRemove takes the tmpfs (every mount stacked at target) away
// and removes target. A target that does not exist is done already.
func unmountAndRemove(target string) error {
	for range 8 { // a repeated publish that raced may have stacked mounts
		ok, err := mounted(target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inspect the target path: %w", err)
		}
		if !ok {
			break
		}
		err = unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			// Something on the node still has a file open there: detach
			// it now, the memory goes when the last file is closed.
			err = unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		}
		if err != nil {
			return fmt.Errorf("unmount the target path: %w", err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the target path: %w", err)
	}
	return nil
}
