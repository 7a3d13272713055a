package catalog

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"

	"github.com/bindery-dev/bindery/internal/message"
)

// Warnings: an instance may name a class or plan no broker offers yet, and
// a binding an instance not created yet — Service Catalog's semantics,
// which GitOps applies rely on, so the catalog records them and they wait.
// A person who typed a name wrong needs to hear it at once, though: the
// catalog says so through the request's warning recorder
// (k8s.io/apiserver/pkg/warning). The Kubernetes API's handler chain
// installs one and sends each warning as a Warning header, which kubectl
// prints; the REST API installs its own and does the same, adding the
// warnings to the object it answers with. Without a recorder (the engine)
// nothing is said.

// warnUnresolved warns that in names a class or plan that is not offered.
func (s *Store) warnUnresolved(ctx context.Context, in *Instance) {
	if in.Resolved() || in.DeletionTimestamp != nil {
		return
	}
	spec := in.Spec
	n, errs := naming(&spec, in.Namespace, field.NewPath("spec"))
	if len(errs) > 0 {
		return
	}
	_, _, err := lookupPlan(ctx, s.pool, &spec, n)
	ref, ok := AsReference(err)
	if !ok {
		return
	}
	class, plan, ns := instanceNames(in)
	switch ref.Reason {
	case ReasonNonexistentServiceClass:
		warning.AddWarning(ctx, "", message.UnknownClass(class, ns))
	case ReasonNonexistentServicePlan:
		warning.AddWarning(ctx, "", message.UnknownPlan(plan, class))
	}
}

// warnNoInstance warns that b names an instance that does not exist.
func warnNoInstance(ctx context.Context, b *Binding) {
	warning.AddWarning(ctx, "", message.UnknownInstance(b.Spec.InstanceRef.Name, b.Namespace))
}

// planChangeRefused words why a provisioned instance cannot move to the
// plan its changed spec names.
func planChangeRefused(r *ReferenceError, in *Instance) string {
	if r.refused != "" {
		return r.refused
	}
	class, plan, _ := instanceNames(in)
	if r.Reason == ReasonNonexistentServiceClass {
		return message.NoSuchClass(class)
	}
	return message.NoSuchPlan(plan, class)
}
