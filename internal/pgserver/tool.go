package pgserver

import (
	"fmt"
	"os"
	"path/filepath"
)

// Tool is the path of one of PostgreSQL's programs (pg_dump, pg_restore,
// psql, ...) beside the server binaries Start uses, so that a client is
// of the server's version.
func Tool(name string) (string, error) {
	bin, err := findBinaries()
	if err != nil {
		return "", err
	}
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("PostgreSQL's %s: %w", name, err)
	}
	return path, nil
}
