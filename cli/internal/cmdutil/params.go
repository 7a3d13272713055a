package cmdutil

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// ParamFlags are --param and --params-json: the parameters a verb sends
// to the broker (provision, update, bind).
type ParamFlags struct {
	Pairs []string
	JSON  string
}

// Add adds the flags to cmd; merge words them for a verb whose parameters
// are merged into those already set (update).
func (p *ParamFlags) Add(cmd *cobra.Command, merge bool) {
	fl := cmd.Flags()
	if merge {
		fl.StringArrayVar(&p.Pairs, "param", nil, "a parameter KEY=VALUE to set (repeatable; KEY=null removes it)")
		fl.StringVar(&p.JSON, "params-json", "", "parameters to merge, as a JSON object, or @FILE")
		return
	}
	fl.StringArrayVar(&p.Pairs, "param", nil, "a parameter KEY=VALUE (repeatable; VALUE is JSON when it parses as JSON)")
	fl.StringVar(&p.JSON, "params-json", "", "parameters as a JSON object, or @FILE")
}

// Map returns the parameters given (Params); nil when none were.
func (p ParamFlags) Map() (map[string]any, error) { return Params(p.Pairs, p.JSON) }

// Params merges --params-json (JSON, or @FILE) with --param k=v pairs; a
// pair's value is JSON when it parses as JSON (numbers, booleans, objects),
// a string otherwise. Nil when neither was given.
func Params(pairs []string, raw string) (map[string]any, error) {
	var out map[string]any
	if raw != "" {
		src := []byte(raw)
		if name, ok := strings.CutPrefix(raw, "@"); ok {
			b, err := os.ReadFile(name)
			if err != nil {
				return nil, Usagef("--params-json @%s: %w", name, err)
			}
			src = b
		}
		if err := json.Unmarshal(src, &out); err != nil || out == nil {
			return nil, Usagef("--params-json: want a JSON object such as '{\"size\": 10}' or @FILE holding one (%v)", err)
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, Usagef("--param %q: want KEY=VALUE", p)
		}
		if out == nil {
			out = map[string]any{}
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		out[k] = val
	}
	return out, nil
}
