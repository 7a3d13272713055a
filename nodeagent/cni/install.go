package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"
)

// InstallOptions are the flags with which the node agent installs the
// plugin on its node (--install-cni) or takes it out (--uninstall-cni).
type InstallOptions struct {
	Install   bool
	Uninstall bool
	// BinDir and ConfDir are the node's CNI directories, as the runtime
	// sees them (containerd's bin_dir and conf_dir).
	BinDir  string
	ConfDir string
	// Binary is the bindery-cni executable to copy; empty means the one
	// next to the running program.
	Binary       string
	ManagedCIDRs string // comma-separated
	Kubeconfig   string
	StateDir     string
}

// AddFlags registers the options' flags.
func (o *InstallOptions) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Install, "install-cni", false, "install bindery-cni on this node and exit: copy it into --cni-bin-dir and chain it in the first conflist of --cni-conf-dir")
	fs.BoolVar(&o.Uninstall, "uninstall-cni", false, "take bindery-cni out of every conflist in --cni-conf-dir, remove it from --cni-bin-dir, and exit")
	fs.StringVar(&o.BinDir, "cni-bin-dir", "/opt/cni/bin", "the node's CNI plugin `directory`")
	fs.StringVar(&o.ConfDir, "cni-conf-dir", "/etc/cni/net.d", "the node's CNI configuration `directory`")
	fs.StringVar(&o.Binary, "cni-plugin-binary", "", "bindery-cni `file` to install (default: bindery-cni next to this program)")
	fs.StringVar(&o.ManagedCIDRs, "cni-managed-cidrs", "", "comma-separated `CIDRs` of the managed services, which Pods reach only where bound (required with --install-cni)")
	fs.StringVar(&o.Kubeconfig, "cni-kubeconfig", "", "kubeconfig `file`, as the node sees it, through which the plugin reads Pods' annotations when the runtime does not pass them")
	fs.StringVar(&o.StateDir, "cni-state-dir", "", "`directory` on the node for the plugin's records of attachments (default "+DefaultStateDir+")")
}

// Requested reports whether the flags ask for an install or an uninstall.
func (o *InstallOptions) Requested() bool { return o.Install || o.Uninstall }

// Validate reports every problem with the options together.
func (o *InstallOptions) Validate() error {
	var errs []error
	if o.Install && o.Uninstall {
		errs = append(errs, errors.New("--install-cni and --uninstall-cni: give one"))
	}
	if o.BinDir == "" {
		errs = append(errs, errors.New("--cni-bin-dir must not be empty"))
	}
	if o.ConfDir == "" {
		errs = append(errs, errors.New("--cni-conf-dir must not be empty"))
	}
	if o.Install {
		cidrs := o.cidrs()
		if len(cidrs) == 0 {
			errs = append(errs, errors.New("--cni-managed-cidrs is required with --install-cni"))
		}
		for _, c := range cidrs {
			if _, err := netip.ParsePrefix(c); err != nil {
				errs = append(errs, fmt.Errorf("--cni-managed-cidrs: %q is not a CIDR", c))
			}
		}
	}
	return errors.Join(errs...)
}

func (o *InstallOptions) cidrs() []string {
	var out []string
	for _, c := range strings.Split(o.ManagedCIDRs, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// Run installs or uninstalls, as the flags ask.
func (o *InstallOptions) Run(log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.Uninstall {
		return Uninstall(log, o.BinDir, o.ConfDir)
	}
	src := o.Binary
	if src == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this program: %w", err)
		}
		src = filepath.Join(filepath.Dir(self), PluginType)
	}
	return Install(log, src, o.BinDir, o.ConfDir, NewEntry(o.cidrs(), o.Kubeconfig, o.StateDir))
}

// NewEntry is the plugin's entry in a conflist, as Install chains it:
// managedCIDRs, the pod-annotations capability, and kubeconfig and stateDir
// when not empty. A test that runs a real node chains the plugin with
// Install(log, "bin/bindery-cni", binDir, confDir, NewEntry(...)) before the
// runtime starts.
func NewEntry(managedCIDRs []string, kubeconfig, stateDir string) map[string]any {
	entry := map[string]any{
		"type":         PluginType,
		"managedCIDRs": managedCIDRs,
		"capabilities": map[string]any{PodAnnotationsCapability: true},
	}
	if kubeconfig != "" {
		entry["kubeconfig"] = kubeconfig
	}
	if stateDir != "" {
		entry["stateDir"] = stateDir
	}
	return entry
}

// confExtensions are the files a runtime reads as CNI configuration.
var confExtensions = []string{".conf", ".conflist", ".json"}

// Install copies the plugin binary src into binDir, then chains entry (a
// plugin configuration whose type is bindery-cni) at the end of the network
// that the runtime uses: the first configuration file in confDir, in the
// order runtimes read them. An entry already there is replaced, so running
// it again changes nothing; a single-plugin .conf becomes a .conflist.
func Install(log *slog.Logger, src, binDir, confDir string, entry map[string]any) error {
	if err := copyBinary(src, filepath.Join(binDir, PluginType)); err != nil {
		return err
	}
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil {
		return fmt.Errorf("list CNI configuration in %s: %w", confDir, err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no CNI configuration in %s: install the cluster's network plugin first", confDir)
	}
	path := files[0]
	conf, err := readConf(path)
	if err != nil {
		return err
	}
	target := path
	plugins, isList := conf["plugins"].([]any)
	if !isList {
		// A .conf is one plugin: wrap it in a list of the same name.
		single := conf
		conf = map[string]any{"cniVersion": single["cniVersion"], "name": single["name"]}
		plugins = []any{single}
		target = strings.TrimSuffix(path, filepath.Ext(path)) + ".conflist"
	}
	v, _ := conf["cniVersion"].(string)
	if ok, err := version.GreaterThanOrEqualTo(v, "0.4.0"); err != nil || !ok {
		return fmt.Errorf("%s: cniVersion %q: bindery-cni needs 0.4.0 or later", path, v)
	}
	kept := make([]any, 0, len(plugins)+1)
	for _, p := range plugins {
		if m, ok := p.(map[string]any); ok && m["type"] == PluginType {
			continue
		}
		kept = append(kept, p)
	}
	// JSON round trip so that the comparison sees what a file would hold.
	var want any
	data, _ := json.Marshal(entry)
	_ = json.Unmarshal(data, &want)
	kept = append(kept, want)
	if target == path && reflect.DeepEqual(normalize(plugins), normalize(kept)) {
		log.Info("bindery-cni is already chained", "conf", path)
		return nil
	}
	conf["plugins"] = kept
	if err := writeConf(target, conf); err != nil {
		return err
	}
	if target != path {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove %s, now %s: %w", path, target, err)
		}
	}
	log.Info("chained bindery-cni", "conf", target, "network", conf["name"])
	return nil
}

// Uninstall takes the plugin out of every configuration in confDir, then
// removes its binary: in that order, a runtime never calls a plugin that
// is gone. What is not there is not an error.
func Uninstall(log *slog.Logger, binDir, confDir string) error {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil {
		return fmt.Errorf("list CNI configuration in %s: %w", confDir, err)
	}
	for _, path := range files {
		conf, err := readConf(path)
		if err != nil {
			return err
		}
		plugins, ok := conf["plugins"].([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(plugins))
		for _, p := range plugins {
			if m, ok := p.(map[string]any); ok && m["type"] == PluginType {
				continue
			}
			kept = append(kept, p)
		}
		if len(kept) == len(plugins) {
			continue
		}
		conf["plugins"] = kept
		if err := writeConf(path, conf); err != nil {
			return err
		}
		log.Info("took bindery-cni out", "conf", path)
	}
	bin := filepath.Join(binDir, PluginType)
	if err := os.Remove(bin); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", bin, err)
	}
	return nil
}

// normalize makes values decoded with UseNumber comparable with a plain
// JSON round trip.
func normalize(v any) any {
	data, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

func readConf(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CNI configuration: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber() // numbers come back as written
	var conf map[string]any
	if err := d.Decode(&conf); err != nil {
		return nil, fmt.Errorf("decode CNI configuration %s: %w", path, err)
	}
	return conf, nil
}

// writeConf replaces path atomically: a runtime reading the directory never
// sees half a file.
func writeConf(path string, conf map[string]any) error {
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return fmt.Errorf("encode CNI configuration: %w", err)
	}
	return writeAtomic(path, append(data, '\n'), 0o644)
}

func copyBinary(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open plugin binary: %w", err)
	}
	defer in.Close()
	data, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read plugin binary %s: %w", src, err)
	}
	return writeAtomic(dst, data, 0o755)
}

// writeAtomic writes data to a temporary file next to path and renames it
// over path, so that a runtime never runs or reads a partial file.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr, os.Chmod(tmp.Name(), mode)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
