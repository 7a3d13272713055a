// Package ociimage writes container images without a registry or a
// container engine: one layer built from files named here, a config, and
// a tarball that `ctr images import` (and `docker load`) accept. The test
// node uses it for its pause and busybox images; Bindery's own image is
// built the same way.
//
// Images are reproducible: entries are sorted, owned by root and dated at
// the Unix epoch, so the same inputs give the same digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of an image's layer. Exactly one of Source, Data (for
// a regular file), Link (a symbolic link) or Dir applies.
type File struct {
	// Path is the absolute path in the image.
	Path string
	// Mode holds the permission bits (0o755 for a program); 0 means 0o644
	// for files and 0o755 for directories.
	Mode fs.FileMode
	// Source is a file on this machine whose contents are copied.
	Source string
	// Data is the contents when Source is empty.
	Data []byte
	// Link makes the entry a symbolic link to this target.
	Link string
	// Dir makes the entry a directory.
	Dir bool
	// Owner is the entry's user and group id (0: root).
	Owner int
}

// Spec is what an image holds.
type Spec struct {
	// Files are the layer's entries; missing parent directories are added.
	Files []File
	// Config holds the entrypoint, command, environment, user and working
	// directory.
	Config v1.Config
}

// Build assembles the image described by s.
func Build(s Spec) (v1.Image, error) {
	layerTar, err := layer(s.Files)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, l)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	// The programs in an image are built or found on this machine.
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config = s.Config
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// WriteFile writes img to file as a tarball tagged ref (such as
// "bindery.test/pause:1"), which `ctr images import` names ref.
func WriteFile(file, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return fmt.Errorf("write image %s to %s: %w", ref, file, err)
	}
	return nil
}

// layer writes files as an uncompressed tar, parents first.
func layer(files []File) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("file path %q: must be a clean absolute path below /", f.Path)
		}
		if _, dup := entries[f.Path]; dup {
			return nil, fmt.Errorf("file path %q: given twice", f.Path)
		}
		entries[f.Path] = f
		for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				entries[dir] = File{Path: dir, Dir: true}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	// Sorted by path, so a directory comes before what it holds.
	slices.Sort(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, p := range names {
		f := entries[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: epoch, Format: tar.FormatPAX}
		var data []byte
		switch {
		case f.Dir:
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, int64(perm(f.Mode, 0o755)), h.Name+"/"
			if f.Mode&fs.ModeSticky != 0 {
				h.Mode |= 0o1000 // as /tmp needs
			}
		case f.Link != "":
			h.Typeflag, h.Mode, h.Linkname = tar.TypeSymlink, 0o777, f.Link
		default:
			data = f.Data
			if f.Source != "" {
				b, err := os.ReadFile(f.Source)
				if err != nil {
					return nil, fmt.Errorf("file %s: %w", f.Path, err)
				}
				data = b
			}
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, int64(perm(f.Mode, 0o644)), int64(len(data))
		}
		h.Uid, h.Gid = f.Owner, f.Owner
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

func perm(m, def fs.FileMode) fs.FileMode {
	if m.Perm() == 0 {
		return def
	}
	return m.Perm()
}

// Pause is the image of the pause program (tools/pause) built static at
// binary.
func Pause(binary string) Spec {
	return Spec{
		Files:  []File{{Path: "/pause", Source: binary, Mode: 0o755}},
		Config: v1.Config{Entrypoint: []string{"/pause"}},
	}
}

// Busybox is an image with the static busybox at binary (Debian's
// busybox-static installs it as /bin/busybox) and a link in /bin for
// each of its applets, so that `sh`, `cat` and `sleep` work as commands;
// its command is sh.
func Busybox(ctx context.Context, binary string) (Spec, error) {
	if err := checkStatic(binary); err != nil {
		return Spec{}, err
	}
	out, err := exec.CommandContext(ctx, binary, "--list").Output()
	if err != nil {
		return Spec{}, fmt.Errorf("list busybox applets: %w", err)
	}
	s := Spec{
		Files: []File{
			{Path: "/bin/busybox", Source: binary, Mode: 0o755},
			{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky},
		},
		Config: v1.Config{
			Cmd: []string{"sh"},
			Env: []string{"PATH=/bin"},
		},
	}
	for applet := range strings.FieldsSeq(string(out)) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		s.Files = append(s.Files, File{Path: "/bin/" + applet, Link: "busybox"})
	}
	return s, nil
}

// BuildStatic builds the Go package pkg (such as "./tools/pause") of the
// module at moduleDir into out as a static binary (no cgo), the form a
// program needs in an image without a C library; ldflags are added to
// the linker's (-X settings such as Bindery's version).
func BuildStatic(ctx context.Context, moduleDir, pkg, out string, ldflags ...string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+strings.Join(append([]string{"-s", "-w"}, ldflags...), " "), "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, bytes.TrimSpace(b))
	}
	return nil
}

// checkStatic fails for a program that needs a dynamic loader, which an
// image without a C library cannot run.
func checkStatic(binary string) error {
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("read %s: %w", binary, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically; a static one is needed (Debian: apt-get install busybox-static)", binary)
		}
	}
	return nil
}
