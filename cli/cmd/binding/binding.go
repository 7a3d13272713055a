// Package binding is `bindery bind`, `bindings`, `credentials` and
// `unbind`.
package binding

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bindery-dev/bindery/cli/cmd/instance"
	"github.com/bindery-dev/bindery/cli/internal/api"
	"github.com/bindery-dev/bindery/cli/internal/cmdutil"
	"github.com/bindery-dev/bindery/cli/internal/output"
	"github.com/bindery-dev/bindery/cli/internal/wait"
)

// BindOptions are `bind`'s inputs.
type BindOptions struct {
	F          *cmdutil.Factory
	Name       string
	Instance   string
	SecretName string
	Params     []string
	ParamsJSON string
	Wait       cmdutil.WaitFlags
}

// NewBind builds `bind NAME --instance INSTANCE`.
func NewBind(f *cmdutil.Factory, run func(context.Context, *BindOptions) error) *cobra.Command {
	o := &BindOptions{F: f}
	if run == nil {
		run = Bind
	}
	cmd := &cobra.Command{
		Use: "bind NAME --instance INSTANCE", Short: "Create a binding (credentials) of an instance", Args: cobra.ExactArgs(1),
		Example: "  bindery bind orders-app --instance orders-db --wait && bindery credentials orders-app -o dotenv > .env",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Instance, "instance", "i", "", "the instance to bind, in the same namespace")
	fl.StringVar(&o.SecretName, "secret-name", "", "the Kubernetes Secret the credentials go into (default NAME)")
	fl.StringArrayVar(&o.Params, "param", nil, "a parameter KEY=VALUE (repeatable)")
	fl.StringVar(&o.ParamsJSON, "params-json", "", "parameters as a JSON object, or @FILE")
	o.Wait.Add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("instance", cmdutil.Completer(f, "/instances", true, nil))
	return cmd
}

// Bind creates the binding and, with --wait, follows it.
func Bind(ctx context.Context, o *BindOptions) error {
	if o.Instance == "" {
		return cmdutil.Usagef("--instance is required: the instance to bind (`bindery instances` lists them)")
	}
	params, err := cmdutil.Params(o.Params, o.ParamsJSON)
	if err != nil {
		return err
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	spec := map[string]any{"instanceRef": map[string]any{"name": o.Instance}}
	if o.SecretName != "" {
		spec["secretName"] = o.SecretName
	}
	if params != nil {
		spec["parameters"] = params
	}
	var b api.Object
	if err := c.Do(ctx, http.MethodPost, "/bindings", nil, map[string]any{"name": o.Name, "namespace": o.F.NS(), "spec": spec}, &b); err != nil {
		return err
	}
	return Kind.Finish(ctx, o.F, c, b, o.Wait, wait.Settled)
}

// Kind is how the verbs list, follow and print bindings.
var Kind = cmdutil.Kind{
	Plural: "bindings", Singular: "binding",
	Header: []string{"NAMESPACE", "NAME", "INSTANCE", "SECRET", "STATUS"},
	Row: func(b api.Object) []string {
		var r row
		r.Namespace, r.Name = b.Str("namespace"), b.Str("name")
		r.Spec.InstanceRef.Name, r.Spec.SecretName = b.Str("spec", "instanceRef", "name"), b.Str("spec", "secretName")
		r.State = instance.StateOf(b)
		return r.cells()
	},
	Rows: cmdutil.RowsOf(row.cells),
}

// row is what the table of bindings shows of one.
type row struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Spec      struct {
		InstanceRef struct {
			Name string `json:"name"`
		} `json:"instanceRef"`
		SecretName string `json:"secretName"`
	} `json:"spec"`
	instance.State
}

func (r row) cells() []string {
	return []string{r.Namespace, r.Name, r.Spec.InstanceRef.Name, r.Spec.SecretName, r.State.Word()}
}

// NewList builds `bindings`.
func NewList(f *cmdutil.Factory) *cobra.Command {
	return Kind.NewList(f, "List bindings", "binding", "sb")
}

// CredentialsOptions are `credentials`'s inputs.
type CredentialsOptions struct {
	F      *cmdutil.Factory
	Name   string
	Format string
}

// NewCredentials builds `credentials BINDING [-o json|yaml|env|dotenv]`.
func NewCredentials(f *cmdutil.Factory, run func(context.Context, *CredentialsOptions) error) *cobra.Command {
	o := &CredentialsOptions{F: f}
	if run == nil {
		run = Credentials
	}
	return &cobra.Command{
		Use:   "credentials BINDING [-o json|yaml|env|dotenv]",
		Short: "Print a binding's credentials",
		Long: "Prints the credentials the broker returned for the binding. -o env prints `export KEY='value'` lines for a shell,\n" +
			"-o dotenv KEY=\"value\" lines for a .env file; keys are upper-cased and nested values are JSON.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.Completer(f, "/bindings", true, nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			o.Format = f.Output
			return run(cmd.Context(), o)
		},
	}
}

// Credentials reads and prints the credentials.
func Credentials(ctx context.Context, o *CredentialsOptions) error {
	if o.Format == "" {
		o.Format = "yaml"
	}
	if err := output.Check(o.Format, "json", "yaml", "env", "dotenv"); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	var creds map[string]any
	if err := c.Do(ctx, http.MethodGet, api.Path("bindings", o.Name, "credentials"), o.F.NSQuery(), nil, &creds); err != nil {
		return err
	}
	if ok, err := output.Structured(o.F.IO.Out, o.Format, creds); ok {
		return err
	}
	keys := make([]string, 0, len(creds))
	for k := range creds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := EnvName(k)
		val := scalar(creds[k])
		if o.Format == "env" {
			fmt.Fprintf(o.F.IO.Out, "export %s='%s'\n", name, strings.ReplaceAll(val, "'", `'\''`))
		} else {
			r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "$", `\$`)
			fmt.Fprintf(o.F.IO.Out, "%s=\"%s\"\n", name, r.Replace(val))
		}
	}
	return nil
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

// NewUnbind builds `unbind BINDING`.
func NewUnbind(f *cmdutil.Factory) *cobra.Command {
	return Kind.NewDelete(f, "unbind BINDING", "Delete a binding; the broker revokes its credentials", "unbound",
		"its credentials stay valid at the broker until someone revokes them there")
}
