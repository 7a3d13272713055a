package deploy

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bindery-dev/bindery/internal/ociimage"
)

// The Compose Specification's top-level elements and service attributes
// (https://github.com/compose-spec/compose-spec/blob/main/spec.md); an
// extension starts with x-.
var (
	topLevel    = []string{"version", "name", "include", "services", "networks", "volumes", "configs", "secrets", "models"}
	serviceKeys = []string{"annotations", "attach", "blkio_config", "build", "cap_add", "cap_drop", "cgroup", "cgroup_parent",
		"command", "configs", "container_name", "cpu_count", "cpu_percent", "cpu_period", "cpu_quota", "cpu_rt_period",
		"cpu_rt_runtime", "cpu_shares", "cpus", "cpuset", "credential_spec", "depends_on", "deploy", "develop", "device_cgroup_rules",
		"devices", "dns", "dns_opt", "dns_search", "domainname", "entrypoint", "env_file", "environment", "expose", "extends",
		"external_links", "extra_hosts", "gpus", "group_add", "healthcheck", "hostname", "image", "init", "ipc", "isolation", "labels",
		"links", "logging", "mac_address", "mem_limit", "mem_reservation", "mem_swappiness", "memswap_limit", "network_mode",
		"networks", "oom_kill_disable", "oom_score_adj", "pid", "pids_limit", "platform", "ports", "post_start", "pre_stop",
		"privileged", "profiles", "pull_policy", "read_only", "restart", "runtime", "scale", "secrets", "security_opt", "shm_size",
		"stdin_open", "stop_grace_period", "stop_signal", "storage_opt", "sysctls", "tmpfs", "tty", "ulimits", "user", "userns_mode",
		"uts", "volumes", "volumes_from", "working_dir"}
	healthKeys  = []string{"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
	conditions  = []string{"service_started", "service_healthy", "service_completed_successfully"}
	restarts    = []string{"no", "always", "on-failure", "unless-stopped"}
	projectName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	duration    = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(us|ms|s|m|h))+$`)
	port        = regexp.MustCompile(`^((\d{1,3}\.){3}\d{1,3}:)?(\d+(-\d+)?:)?\d+(-\d+)?(/(tcp|udp))?$`)
	// interpolation is ${VAR}, ${VAR:-default}, ${VAR-default},
	// ${VAR:?error}, ${VAR?error}, ${VAR:+alt}; $$ is a literal $.
	interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}`)
)

// withDefaults replaces each interpolation in s with its default, as
// Compose does when the variable is unset ("1" when it has none).
func withDefaults(s string) string {
	return interpolation.ReplaceAllStringFunc(s, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if sub[2] == ":-" || sub[2] == "-" {
			return sub[3]
		}
		return "1"
	})
}

func load(t *testing.T) (map[string]any, string) {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	return doc, string(raw)
}

// TestComposeFollowsTheSpecification checks docker-compose.yaml against
// the Compose Specification's rules, since `docker compose config` is not
// installed here: known elements and attributes, health checks, depends_on
// conditions on services that have health checks, named volumes declared,
// ports, restart policies and interpolations.
func TestComposeFollowsTheSpecification(t *testing.T) {
	doc, raw := load(t)
	for k := range doc {
		if !slices.Contains(topLevel, k) && !strings.HasPrefix(k, "x-") {
			t.Errorf("top-level %q is no element of the Compose Specification", k)
		}
	}
	if n, _ := doc["name"].(string); !projectName.MatchString(n) {
		t.Errorf("name %q: lower case letters, digits, '-' and '_' only", n)
	}
	services, _ := doc["services"].(map[string]any)
	if len(services) == 0 {
		t.Fatal("no services")
	}
	volumes, _ := doc["volumes"].(map[string]any)
	for name, v := range services {
		s, _ := v.(map[string]any)
		at := func(format string, a ...any) { t.Errorf("services.%s: %s", name, fmt.Sprintf(format, a...)) }
		for k := range s {
			if !slices.Contains(serviceKeys, k) && !strings.HasPrefix(k, "x-") {
				at("%q is no service attribute", k)
			}
		}
		if s["image"] == nil && s["build"] == nil {
			at("needs image or build")
		}
		if r, ok := s["restart"].(string); ok && !slices.Contains(restarts, r) && !strings.HasPrefix(r, "on-failure:") {
			at("restart %q", r)
		}
		if hc, ok := s["healthcheck"].(map[string]any); ok {
			for k, v := range hc {
				if !slices.Contains(healthKeys, k) {
					at("healthcheck.%s is no health check attribute", k)
				}
				if str, ok := v.(string); ok && k != "test" && !duration.MatchString(str) {
					at("healthcheck.%s %q is no duration", k, str)
				}
			}
			test, _ := hc["test"].([]any)
			if len(test) == 0 || !slices.Contains([]any{"NONE", "CMD", "CMD-SHELL"}, test[0]) {
				at("healthcheck.test must start with NONE, CMD or CMD-SHELL")
			}
		} else {
			at("has no health check")
		}
		switch d := s["depends_on"].(type) {
		case nil:
		case []any:
			for _, dep := range d {
				if services[fmt.Sprint(dep)] == nil {
					at("depends on unknown service %v", dep)
				}
			}
		case map[string]any:
			for dep, c := range d {
				target, _ := services[dep].(map[string]any)
				if target == nil {
					at("depends on unknown service %s", dep)
					continue
				}
				cond, _ := c.(map[string]any)["condition"].(string)
				if !slices.Contains(conditions, cond) {
					at("depends_on.%s.condition %q", dep, cond)
				}
				if cond == "service_healthy" && target["healthcheck"] == nil {
					at("waits for %s to be healthy, which has no health check", dep)
				}
			}
		default:
			at("depends_on must be a list or a map")
		}
		list, _ := s["volumes"].([]any)
		for _, v := range list {
			str, _ := v.(string)
			src, _, ok := strings.Cut(str, ":")
			if ok && !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "~") {
				if _, declared := volumes[src]; !declared {
					at("named volume %q is not declared under volumes", src)
				}
			}
		}
		ports, _ := s["ports"].([]any)
		for _, p := range ports {
			if str, _ := p.(string); !port.MatchString(withDefaults(str)) {
				at("port %v", p)
			}
		}
		if nm, ok := s["network_mode"].(string); ok {
			if other, ok := strings.CutPrefix(nm, "service:"); ok && services[other] == nil {
				at("network_mode %q names no service", nm)
			}
			if len(ports) > 0 {
				at("publishes ports in another's network namespace (network_mode %s)", nm)
			}
		}
	}
	// Every $ outside comments is an interpolation or $$.
	var body []string
	for _, l := range strings.Split(raw, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			body = append(body, l)
		}
	}
	rest := interpolation.ReplaceAllString(strings.ReplaceAll(strings.Join(body, "\n"), "$$", ""), "")
	if i := strings.Index(rest, "$"); i >= 0 {
		t.Errorf("a $ that is no interpolation: %q", rest[max(0, i-20):min(len(rest), i+20)])
	}
}

// TestComposeRunsBinderyAsTheImageAllows: Bindery's image has no shell, so
// its health checks are CMD with bindery itself; it runs as the image's
// non-root user; the servers are real components; the key, passwords and
// docs/install.md's .env recipe agree.
func TestComposeRunsBinderyAsTheImageAllows(t *testing.T) {
	doc, raw := load(t)
	services, _ := doc["services"].(map[string]any)
	components := []string{"broker", "catalog", "controller", "apiserver", "nodeagent"}
	bindery := 0
	for name, v := range services {
		s, _ := v.(map[string]any)
		img, _ := s["image"].(string)
		if !strings.Contains(img, "bindery") {
			continue
		}
		bindery++
		if s["user"] != "65532:65532" {
			t.Errorf("services.%s runs as %v, want the image's 65532:65532", name, s["user"])
		}
		hc, _ := s["healthcheck"].(map[string]any)
		test, _ := hc["test"].([]any)
		if len(test) < 3 || test[0] != "CMD" || test[1] != "/usr/local/bin/bindery" || test[2] != "health" {
			t.Errorf("services.%s: the health check must be [CMD, /usr/local/bin/bindery, health, URL] (no shell in the image): %v", name, test)
		}
		cmd, _ := s["command"].([]any)
		if len(cmd) < 2 || cmd[0] != "serve" || !slices.Contains(components, fmt.Sprint(cmd[1])) {
			t.Errorf("services.%s: command %v is no `serve COMPONENT`", name, cmd)
		}
		env, _ := s["environment"].(map[string]any)
		for _, k := range []string{"DATABASE_URL", "BINDERY_ENCRYPTION_KEY"} {
			if env[k] == nil {
				t.Errorf("services.%s lacks %s", name, k)
			}
		}
	}
	if bindery < 3 {
		t.Errorf("%d Bindery services, want the broker, the catalog and the engine", bindery)
	}
	readme, err := os.ReadFile("../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range interpolation.FindAllStringSubmatch(raw, -1) {
		if strings.HasSuffix(m[2], "?") && !strings.Contains(string(readme), m[1]+"=") {
			t.Errorf("docker-compose.yaml requires %s, which docs/install.md's .env recipe does not set", m[1])
		}
	}
}

// TestComposeCredentialsForTheHost: the broker creates databases through
// 127.0.0.1 in PostgreSQL's network namespace, on the port PostgreSQL
// listens on and publishes on the host's loopback, so that the
// credentials it issues open the database from the host as they are.
func TestComposeCredentialsForTheHost(t *testing.T) {
	doc, _ := load(t)
	services, _ := doc["services"].(map[string]any)
	pg, _ := services["postgres"].(map[string]any)
	broker, _ := services["broker"].(map[string]any)
	if broker["network_mode"] != "service:postgres" {
		t.Fatalf("the broker's network_mode is %v, want service:postgres", broker["network_mode"])
	}
	env, _ := broker["environment"].(map[string]any)
	target, err := url.Parse(withDefaults(fmt.Sprint(env["BINDERY_TARGET_DATABASE_URL"])))
	if err != nil || target.Hostname() != "127.0.0.1" {
		t.Fatalf("the broker's target database %v (%v): want it at 127.0.0.1", env["BINDERY_TARGET_DATABASE_URL"], err)
	}
	pgEnv, _ := pg["environment"].(map[string]any)
	listens := withDefaults(fmt.Sprint(pgEnv["PGPORT"]))
	want := "127.0.0.1:" + listens + ":" + listens
	ports, _ := pg["ports"].([]any)
	if len(ports) != 1 || withDefaults(fmt.Sprint(ports[0])) != want || target.Port() != listens {
		t.Errorf("PostgreSQL listens on %s and publishes %v; the credentials name port %s: want %s and that port", listens, ports, target.Port(), want)
	}
}

// TestComposeAPIServer checks the standalone Kubernetes API of the compose
// file: its data directory is in a named volume mounted at the image's
// directory for state (owned by the user it runs as, so the volume is
// writable), and its health check trusts the CA it keeps there.
func TestComposeAPIServer(t *testing.T) {
	doc, _ := load(t)
	services, _ := doc["services"].(map[string]any)
	s, _ := services["apiserver"].(map[string]any)
	if s == nil {
		t.Fatal("no apiserver service")
	}
	var cmd []string
	for _, a := range s["command"].([]any) {
		cmd = append(cmd, fmt.Sprint(a))
	}
	i := slices.Index(cmd, "--data-dir")
	if i < 0 || i+1 == len(cmd) {
		t.Fatalf("command %v names no --data-dir", cmd)
	}
	dataDir := cmd[i+1]
	mounted := false
	for _, v := range s["volumes"].([]any) {
		src, dst, _ := strings.Cut(fmt.Sprint(v), ":")
		if dst == ociimage.DataDir && strings.HasPrefix(dataDir, dst+"/") && !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, ".") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("--data-dir %s is not in a named volume mounted at %s: %v", dataDir, ociimage.DataDir, s["volumes"])
	}
	hc, _ := s["healthcheck"].(map[string]any)
	test := fmt.Sprint(hc["test"])
	if !strings.Contains(test, "https://localhost:8443 --cacert "+dataDir+"/ca.crt") {
		t.Errorf("health check %s does not trust the CA in %s", test, dataDir)
	}
}

// TestComposeConfig runs `docker compose config` on the file where Docker
// Compose is installed; elsewhere the tests above stand in for it.
func TestComposeConfig(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker is not installed: TestComposeFollowsTheSpecification checks the file instead")
	}
	if out, err := exec.Command(docker, "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("docker compose is not installed (%v: %s): TestComposeFollowsTheSpecification checks the file instead", err, out)
	}
	cmd := exec.Command(docker, "compose", "-f", "../docker-compose.yaml", "config", "--quiet")
	cmd.Env = append(os.Environ(), "POSTGRES_PASSWORD=p", "BINDERY_ENCRYPTION_KEY=k", "BINDERY_BROKER_PASSWORD=b")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("docker compose config: %v\n%s", err, out)
	}
}
