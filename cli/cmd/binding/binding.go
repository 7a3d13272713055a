// Package binding is `bindery bind`, `bindings`, `credentials` and
// `unbind`.
package binding

import (
	"context"
	"net/http"

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
	Params     cmdutil.ParamFlags
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
		ValidArgsFunction: cobra.NoFileCompletions, // a new name
		Example:           "  bindery bind orders-app --instance orders-db --wait && bindery credentials orders-app -o dotenv > .env",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Instance, "instance", "i", "", "the instance to bind, in the same namespace")
	fl.StringVar(&o.SecretName, "secret-name", "", "the Kubernetes Secret the credentials go into (default NAME)")
	o.Params.Add(cmd, false)
	o.Wait.Add(cmd)
	_ = cmd.RegisterFlagCompletionFunc("instance", cmdutil.Completer(f, "/instances", true, nil))
	return cmd
}

// Bind creates the binding and, with --wait, follows it.
func Bind(ctx context.Context, o *BindOptions) error {
	if o.Instance == "" {
		return cmdutil.Usagef("--instance is required: the instance to bind (`bindery instances` lists them)")
	}
	params, err := o.Params.Map()
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
	cmdutil.Warn(o.F, b)
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
		Use:   "credentials BINDING [-o json|yaml|env|dotenv|env-file]",
		Short: "Print a binding's credentials",
		Long: "Prints the credentials the broker returned for the binding, as they are (-o yaml, the default, or json), or as\n" +
			"environment variables: keys are upper-cased, anything but letters, digits and _ becomes _, nested values are JSON.\n" +
			"  -o env       export KEY='value' lines for a POSIX shell: set -a; . ./file (every value but NUL)\n" +
			"  -o dotenv    KEY='value' lines for docker compose's .env and dotenv libraries, also safe to source\n" +
			"  -o env-file  KEY=value lines for docker run --env-file (no quoting: plain values only)\n" +
			"A value a format cannot carry exactly is refused with the reason, and nothing is printed.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: cmdutil.First(cmdutil.Completer(f, "/bindings", true, nil)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			o.Format = f.Output
			return run(cmd.Context(), o)
		},
	}
}

// Credentials reads and prints the credentials: JSON or YAML as the
// server sent them, or one of the environment formats (credentials.go).
func Credentials(ctx context.Context, o *CredentialsOptions) error {
	if o.Format == "" {
		o.Format = "yaml"
	}
	if err := output.Check(o.Format, CredentialFormats...); err != nil {
		return cmdutil.Usagef("%w", err)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	var creds map[string]any
	if err := c.Do(ctx, http.MethodGet, api.Path("bindings", o.Name, "credentials"), o.F.NSQuery(), nil, &creds); err != nil {
		return api.HintNotFound(err, cmdutil.ByName("bindings"))
	}
	if ok, err := output.Structured(o.F.IO.Out, o.Format, creds); ok {
		return err
	}
	out, err := EnvFormat(o.Format, creds)
	if err != nil {
		return err
	}
	_, err = o.F.IO.Out.Write(out)
	return err
}

// NewUnbind builds `unbind BINDING`.
func NewUnbind(f *cmdutil.Factory) *cobra.Command {
	return Kind.NewDelete(f, "unbind BINDING", "Delete a binding; the broker revokes its credentials", "unbound",
		"its credentials stay valid at the broker until someone revokes them there")
}
