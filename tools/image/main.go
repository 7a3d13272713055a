// Command image writes the container images the test node runs, as
// tarballs for `ctr -n k8s.io images import`, without a registry:
//
//	go run ./tools/image pause   -o pause.tar   [-ref bindery.test/pause:1]
//	go run ./tools/image busybox -o busybox.tar [-ref bindery.test/busybox:1] [-busybox /bin/busybox]
//	go run ./tools/image bindery -o bindery.tar [-ref bindery.test/bindery:1] [-version v1.2.3] [-programs DIR]
//
// bindery builds ./cmd/bindery and ./cmd/bindery-cni statically, or with
// -programs takes the static ones DIR holds (`make image` packs those
// `make build` made, so a warm build cache makes the image in seconds),
// and adds this machine's CA certificates and time zones.
//
// Run it from the repository root (pause builds ./tools/pause).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/bindery-dev/bindery/internal/ociimage"
	binderyversion "github.com/bindery-dev/bindery/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: image pause|busybox|bindery -o FILE [-ref REF]")
	}
	kind := args[0]
	fs := flag.NewFlagSet(kind, flag.ContinueOnError)
	out := fs.String("o", "", "output `file` (required)")
	ref := fs.String("ref", "", "image `reference` the tarball is tagged with (default bindery.test/KIND:1)")
	busybox := fs.String("busybox", "/bin/busybox", "static busybox `binary` (busybox only)")
	caFile := fs.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA certificates `file` (bindery only; Debian's ca-certificates)")
	zoneinfo := fs.String("zoneinfo", "/usr/share/zoneinfo", "time zone `directory` (bindery only; Debian's tzdata)")
	version := fs.String("version", "", "Bindery's `version` the programs report (bindery only; default: what tools/version.sh prints)")
	programsDir := fs.String("programs", "", "`directory` holding static bindery and bindery-cni to pack instead of building them (bindery only)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("-o is required")
	}
	if *ref == "" {
		*ref = "bindery.test/" + kind + ":1"
	}
	var spec ociimage.Spec
	switch kind {
	case "pause":
		tmp, err := os.MkdirTemp("", "pause")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin := filepath.Join(tmp, "pause")
		if err := ociimage.BuildStatic(ctx, ".", "./tools/pause", bin); err != nil {
			return err
		}
		spec = ociimage.Pause(bin)
	case "busybox":
		var err error
		if spec, err = ociimage.Busybox(ctx, *busybox); err != nil {
			return err
		}
	case "bindery":
		tmp, err := os.MkdirTemp("", "bindery-image")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if *version == "" {
			out, err := exec.CommandContext(ctx, "tools/version.sh").Output()
			if err != nil {
				return fmt.Errorf("tools/version.sh: %w (or give -version)", err)
			}
			*version = strings.TrimSpace(string(out))
		}
		if _, err := binderyversion.Parse(*version); err != nil {
			return err
		}
		programs := map[string]string{}
		for _, p := range []string{"bindery", "bindery-cni"} {
			if *programsDir != "" {
				programs[p] = filepath.Join(*programsDir, p)
				continue
			}
			programs[p] = filepath.Join(tmp, p)
			if err := ociimage.BuildStatic(ctx, ".", "./cmd/"+p, programs[p], "-X", binderyversion.LinkerVariable+"="+*version); err != nil {
				return err
			}
		}
		if spec, err = ociimage.Bindery(programs, *caFile, *zoneinfo); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown image %q: want pause, busybox or bindery", kind)
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return err
	}
	return ociimage.WriteFile(*out, *ref, img)
}
