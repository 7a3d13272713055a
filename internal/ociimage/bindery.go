package ociimage

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// NonRoot is the user and group Bindery's image runs as: not root, and
// no name a host is likely to give a real user.
const NonRoot = 65532

// DataDir is the image's directory for state, owned by NonRoot: where a
// volume goes.
const DataDir = "/var/lib/bindery"

// Bindery is the spec of Bindery's image: the static programs given
// (name to path on this machine) in /usr/local/bin, the CA certificates
// and time zones of this machine (Debian's ca-certificates and tzdata),
// an /etc/passwd naming the non-root user it runs as, and no shell. The
// entrypoint is the first program, bindery.
func Bindery(programs map[string]string, caFile, zoneinfo string) (Spec, error) {
	var s Spec
	if _, ok := programs["bindery"]; !ok {
		return s, fmt.Errorf("the bindery program is required")
	}
	for name, path := range programs {
		if err := checkStatic(path); err != nil {
			return s, err
		}
		s.Files = append(s.Files, File{Path: "/usr/local/bin/" + name, Source: path, Mode: 0o755})
	}
	s.Files = append(s.Files,
		File{Path: "/etc/ssl/certs/ca-certificates.crt", Source: caFile},
		File{Path: "/etc/passwd", Data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot)},
		File{Path: "/etc/group", Data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", NonRoot)},
		// The user's home and a data directory (bindery up's and the
		// standalone API server's state) are its own: a volume mounted
		// there starts with that owner, so the read-only image needs no
		// root to prepare it.
		File{Path: "/home/nonroot", Dir: true, Owner: NonRoot},
		File{Path: DataDir, Dir: true, Owner: NonRoot, Mode: 0o700},
		File{Path: "/tmp", Dir: true, Mode: 0o777},
	)
	err := filepath.WalkDir(zoneinfo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(zoneinfo, p)
		dst := "/usr/share/zoneinfo"
		if rel != "." {
			dst += "/" + filepath.ToSlash(rel)
		}
		switch {
		case d.IsDir():
			s.Files = append(s.Files, File{Path: dst, Dir: true})
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			s.Files = append(s.Files, File{Path: dst, Link: target})
		case d.Type().IsRegular() && !strings.HasSuffix(p, ".tab") || strings.HasSuffix(p, "zone1970.tab"):
			s.Files = append(s.Files, File{Path: dst, Source: p})
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("time zones from %s: %w", zoneinfo, err)
	}
	s.Config = v1.Config{
		Entrypoint: []string{"/usr/local/bin/bindery"},
		User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/bin",
			"HOME=/home/nonroot",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":  "bindery",
			"org.opencontainers.image.source": "https://github.com/bindery-dev/bindery",
		},
	}
	return s, nil
}
