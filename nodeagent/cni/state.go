package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// DefaultStateDir is where the plugin records attachments when its
// configuration names no stateDir.
const DefaultStateDir = "/var/lib/cni/bindery"

// attachment is what ADD recorded about one attachment, so that CHECK can
// verify the rules and GC can remove what the runtime forgot.
type attachment struct {
	// Network is the configuration's name: GC, called for one network,
	// collects only its own attachments. Records of earlier releases
	// have none.
	Network     string `json:"network,omitempty"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	NetNS       string `json:"netns"`
	// NetNSInode tells the namespace ADD saw from a later one at the same
	// path, whose table GC must leave alone.
	NetNSInode   uint64         `json:"netnsInode"`
	ManagedCIDRs []netip.Prefix `json:"managedCIDRs"`
	Grants       []Grant        `json:"grants"`
	// Unresolved lists granted host names that did not exist at ADD.
	Unresolved []string `json:"unresolved,omitempty"`
	// Rules is what ADD wrote, in nft's words: the chain's rules, then
	// each set's elements (Ruleset.specs).
	Rules []string `json:"rules"`
}

// stateFile names an attachment's file, <containerID>_<ifName>.json, with
// '%', '/' and '_' escaped in both so that no two attachments share a name.
func stateFile(dir, containerID, ifName string) string {
	return filepath.Join(dir, escaper.Replace(containerID)+"_"+escaper.Replace(ifName)+".json")
}

var escaper = strings.NewReplacer("%", "%25", "/", "%2F", "_", "%5F")

func writeAttachment(dir string, a *attachment) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode attachment state: %w", err)
	}
	path := stateFile(dir, a.ContainerID, a.IfName)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("write attachment state: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write attachment state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write attachment state: %w", err)
	}
	return nil
}

// readAttachment returns the recorded attachment, or an error wrapping
// fs.ErrNotExist when there is none.
func readAttachment(path string) (*attachment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read attachment state: %w", err)
	}
	var a attachment
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("decode attachment state %s: %w", path, err)
	}
	return &a, nil
}

func removeAttachment(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove attachment state: %w", err)
	}
	return nil
}

// listAttachments returns the paths of every recorded attachment.
func listAttachments(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list attachment state: %w", err)
	}
	return paths, nil
}
