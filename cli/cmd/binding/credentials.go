package binding

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// CredentialFormats are the formats `credentials -o` prints.
var CredentialFormats = []string{"json", "yaml", "env", "dotenv", "env-file"}

// Credentials are written by brokers, some of them third parties, and the
// files these formats make are sourced by shells, read by docker and by
// dotenv libraries. Each format is written so that its consumer reads back
// exactly the value the broker sent, and so that a POSIX shell sourcing
// the file (`set -a; . ./file`, which people do with dotenv files too)
// never runs anything from it. A value a format cannot carry so is
// refused, naming the key and why, and nothing is written.
//
//   - env: export KEY='value'. POSIX single quotes keep every byte as it
//     is but the quote itself, written '\'' (close, escaped quote, open).
//     Only NUL cannot be carried (no C string holds it).
//   - dotenv: KEY='value'. docker compose and the dotenv libraries take a
//     single-quoted value literally, across lines, but know no way to put
//     a quote inside one; CR is normalised away by some of them (godotenv
//     reads CRLF as LF) and a backslash before the closing quote, or
//     before another backslash, is read as an escape by some (godotenv,
//     python-dotenv). Those are refused.
//   - env-file: KEY=value for `docker run --env-file`, which takes the rest
//     of the line as it is, quotes included, and has no way to write a
//     line break. As the line is unquoted, a shell would act on its
//     blanks and metacharacters, so those are refused too.

// EnvFormat writes creds in one of the environment formats: env, dotenv
// or env-file, one line per key, in key order.
func EnvFormat(format string, creds map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(creds))
	for k := range creds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	seen := map[string]string{}
	for _, k := range keys {
		name := EnvName(k)
		if other, ok := seen[name]; ok {
			return nil, fmt.Errorf("credentials keys %q and %q both become %s: use -o json or -o yaml", other, k, name)
		}
		seen[name] = k
		val := scalar(creds[k])
		if why := refusal(format, val); why != "" {
			return nil, fmt.Errorf("the value of %q %s, which -o %s cannot carry exactly: use %s", k, why, format, alternative(format))
		}
		switch format {
		case "env":
			fmt.Fprintf(&b, "export %s='%s'\n", name, strings.ReplaceAll(val, "'", `'\''`))
		case "dotenv":
			fmt.Fprintf(&b, "%s='%s'\n", name, val)
		default:
			fmt.Fprintf(&b, "%s=%s\n", name, val)
		}
	}
	return b.Bytes(), nil
}

// refusal says why format cannot carry val, or "".
func refusal(format, val string) string {
	switch {
	case strings.ContainsRune(val, 0):
		return "holds a NUL character"
	case !utf8.ValidString(val):
		return "is not valid UTF-8"
	case format == "env":
		return ""
	case strings.ContainsRune(val, '\r'):
		return "holds a carriage return"
	case format == "dotenv" && strings.ContainsRune(val, '\''):
		return "holds a single quote"
	case format == "dotenv" && (strings.HasSuffix(val, `\`) || strings.Contains(val, `\\`)):
		return "holds a backslash that dotenv readers take for an escape"
	case format == "env-file" && strings.ContainsRune(val, '\n'):
		return "holds a line break"
	case format == "env-file" && strings.ContainsAny(val, " \t\v\f;&|<>()$`\\\"'"):
		return "holds blanks or shell metacharacters (a shell sourcing the file would act on them)"
	}
	return ""
}

func alternative(format string) string {
	if format == "env-file" {
		return "-o env or -o dotenv (docker compose's env_file reads -o dotenv)"
	}
	return "-o env (for a shell) or -o json"
}

// EnvName turns a credentials key into an environment variable name:
// upper case, anything but letters, digits and '_' becomes '_', and a
// leading digit gets a '_' before it.
func EnvName(k string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(k) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "_" + s
	}
	return s
}

// scalar is a credential's value as an environment variable's: strings
// as they are, anything else as JSON.
func scalar(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	}
	var b strings.Builder
	_ = jsonEncode(&b, v)
	return strings.TrimSpace(b.String())
}
