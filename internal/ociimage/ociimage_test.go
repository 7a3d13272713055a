package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"slices"
	"testing"
)

func TestLayerAddsParentsInOrder(t *testing.T) {
	t.Parallel()
	b, err := layer([]File{
		{Path: "/usr/bin/tool", Data: []byte("x"), Mode: 0o755},
		{Path: "/etc/tool.conf", Data: []byte("y")},
		{Path: "/usr/bin/t", Link: "tool"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	modes := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
	}
	want := []string{"etc/", "etc/tool.conf", "usr/", "usr/bin/", "usr/bin/t", "usr/bin/tool"}
	if !slices.Equal(names, want) {
		t.Errorf("entries = %q, want %q", names, want)
	}
	if modes["usr/bin/tool"] != 0o755 || modes["etc/tool.conf"] != 0o644 || modes["usr/"] != 0o755 {
		t.Errorf("modes = %v", modes)
	}
}

func TestLayerRefusesBadPaths(t *testing.T) {
	t.Parallel()
	for _, files := range [][]File{
		{{Path: "relative"}},
		{{Path: "/a/../b"}},
		{{Path: "/"}},
		{{Path: "/a"}, {Path: "/a"}},
	} {
		if _, err := layer(files); err == nil {
			t.Errorf("layer(%v): no error", files)
		}
	}
}

func TestBuildIsReproducible(t *testing.T) {
	t.Parallel()
	spec := Spec{Files: []File{{Path: "/hello", Data: []byte("hi")}}}
	var digests []string
	for range 2 {
		img, err := Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Errorf("digests differ: %v", digests)
	}
}

func TestCheckStatic(t *testing.T) {
	t.Parallel()
	// The test binary is dynamic only with cgo; /bin/sh on Debian always is.
	if err := checkStatic("/bin/sh"); err == nil {
		t.Error("checkStatic(/bin/sh): no error for a dynamic program")
	}
	if err := checkStatic("/bin/busybox"); err != nil {
		t.Skipf("no static busybox here: %v", err)
	}
}
