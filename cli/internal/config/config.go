// Package config keeps the CLI's server and token in
// $XDG_CONFIG_HOME/bindery/config.yaml (mode 0600, since it holds a token);
// BINDERY_URL and BINDERY_TOKEN override it.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// Config is what `bindery login` saves.
type Config struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// Path is where the configuration lives: $XDG_CONFIG_HOME, else
// ~/.config, as the XDG base directory specification says.
func Path(getenv func(string) string) (string, error) {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return "", errors.New("neither XDG_CONFIG_HOME nor HOME is set: set one so that the configuration has a place")
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "bindery", "config.yaml"), nil
}

// Load reads the file (a missing one is an empty configuration) and applies
// BINDERY_URL and BINDERY_TOKEN over it.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	p, err := Path(getenv)
	if err == nil {
		raw, rerr := os.ReadFile(p)
		switch {
		case errors.Is(rerr, fs.ErrNotExist):
		case rerr != nil:
			return c, fmt.Errorf("read %s: %w", p, rerr)
		default:
			if err := yaml.UnmarshalStrict(raw, &c); err != nil {
				return c, fmt.Errorf("%s: %w (fix it, or run `bindery login` again)", p, err)
			}
		}
	}
	if v := getenv("BINDERY_URL"); v != "" {
		c.URL = v
	}
	if v := getenv("BINDERY_TOKEN"); v != "" {
		c.Token = v
	}
	return c, nil
}

// Save writes c with mode 0600, replacing the file atomically.
func Save(getenv func(string) string, c Config) (string, error) {
	p, err := Path(getenv)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(p), err)
	}
	raw, err := yaml.Marshal(c)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".config-*.yaml")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}
