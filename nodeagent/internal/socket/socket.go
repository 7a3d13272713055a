// Package socket looks after the unix sockets the node agent serves the
// kubelet on (a device plugin's, the CSI driver's and its registration
// socket): claiming a path before listening on it, and telling one
// incarnation of a socket file from the next, since the kubelet deletes
// sockets in its directories when it restarts.
package socket

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// ErrInUse is returned by Claim when a socket at the path answers
// connections: another process (a second node agent) serves it.
var ErrInUse = errors.New("socket is served by another process")

// Claim makes path free for a new listener: nothing there, or a stale
// socket nobody answers on (left by an earlier run), which it removes and
// then reports removed. A socket that answers belongs to a live process and
// is left alone (ErrInUse); so is anything that is not a socket, which the
// error tells the operator to remove for owner ("the CSI driver") to start.
func Claim(ctx context.Context, path, owner string) (removed bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return false, fmt.Errorf("%s exists and is not a socket; remove it to let %s start", path, owner)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err == nil {
		_ = c.Close()
		return false, fmt.Errorf("%w: %s accepts connections", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, fmt.Errorf("probe %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return true, nil
}

// Stamp identifies one incarnation of a file: a path deleted and created
// again gets a new change time even when its inode is reused.
type Stamp struct {
	dev, ino   uint64
	ctimeNanos int64
}

// StampOf returns the file's stamp, or the zero Stamp when it is missing.
func StampOf(path string) Stamp {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return Stamp{}
	}
	return Stamp{dev: uint64(st.Dev), ino: st.Ino, ctimeNanos: st.Ctim.Nano()} //nolint:unconvert // Dev is narrower on some platforms
}

// Exists reports whether the stamp is of a file that existed.
func (s Stamp) Exists() bool { return s != Stamp{} }
