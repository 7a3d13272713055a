package ociimage

import (
	"archive/tar"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestBinderyImageReadBack builds Bindery's image around a static program
// (tools/pause stands in for bindery: the spec does not care what the
// program does, and building cmd/bindery is `make image`'s work), writes
// the tarball, and reads it back as `docker load` would: the tag, the
// non-root user, the entrypoint, one layer with the programs, the CA
// certificates, the time zones and no shell; and a second build has the
// same digest.
func TestBinderyImageReadBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := BuildStatic(context.Background(), "../..", "./tools/pause", prog); err != nil {
		t.Fatal(err)
	}
	spec, err := Bindery(map[string]string{"bindery": prog, "bindery-cni": prog}, "/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo")
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "bindery.tar")
	if err := WriteFile(file, "bindery.test/bindery:dev", img); err != nil {
		t.Fatal(err)
	}

	tag, _ := name.NewTag("bindery.test/bindery:dev")
	back, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatalf("read the tarball back: %v", err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/usr/local/bin/bindery"}) {
		t.Errorf("entrypoint %q", cf.Config.Entrypoint)
	}
	if cf.OS != "linux" || !cf.Created.Time.Equal(cf.Created.Time.UTC()) || cf.Created.Unix() != 0 {
		t.Errorf("os %q, created %v: want linux at the epoch", cf.OS, cf.Created)
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	for _, want := range []string{"usr/local/bin/bindery", "usr/local/bin/bindery-cni", "etc/ssl/certs/ca-certificates.crt",
		"usr/share/zoneinfo/UTC", "usr/share/zoneinfo/Europe/Berlin", "etc/passwd", "home/nonroot/", "var/lib/bindery/"} {
		if entries[want] == nil {
			t.Errorf("the layer lacks %s", want)
		}
	}
	if h := entries["usr/local/bin/bindery"]; h != nil && h.Mode&0o111 == 0 {
		t.Errorf("bindery is not executable: %o", h.Mode)
	}
	for n, h := range entries {
		if strings.HasSuffix(n, "bin/sh") || strings.HasSuffix(n, "bin/bash") || strings.HasSuffix(n, "busybox") {
			t.Errorf("the image has a shell: %s", n)
		}
		owner := 0
		if n == "home/nonroot/" || n == "var/lib/bindery/" {
			owner = NonRoot
		}
		if h.Uid != owner || h.Gid != owner || !h.ModTime.Equal(entries["etc/passwd"].ModTime) {
			t.Errorf("%s: uid %d, gid %d, mtime %v: want %d and one fixed time", n, h.Uid, h.Gid, h.ModTime, owner)
		}
	}

	again, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds differ: %s and %s", d1, d2)
	}
	if st, err := os.Stat(file); err == nil {
		t.Logf("image tarball: %d bytes", st.Size())
	}
}

// TestBinderyRefusesDynamicPrograms: a program that needs a C library
// cannot run in an image without one.
func TestBinderyRefusesDynamicPrograms(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/ls"); err != nil {
		t.Skip("no /bin/ls")
	}
	if _, err := Bindery(map[string]string{"bindery": "/bin/ls"}, "/etc/ssl/certs/ca-certificates.crt", "/usr/share/zoneinfo"); err == nil {
		t.Error("a dynamically linked bindery was accepted")
	}
	if _, err := Bindery(map[string]string{"other": "/bin/ls"}, "", ""); err == nil {
		t.Error("an image without bindery was accepted")
	}
}
