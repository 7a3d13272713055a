// Package servicebinding implements the Service Binding Specification for
// Kubernetes 1.1.0 (https://github.com/servicebinding/spec): it projects a
// ServiceBinding's Secret into the workloads the binding selects, as a
// volume under $SERVICE_BINDING_ROOT and, when asked, as environment
// variables. Any Provisioned Service is accepted; Bindery's own
// servicecatalog.k8s.io ServiceBindings are one, through
// status.binding.name.
//
// The projection itself is a pure function on a Pod template (Project and
// Unproject, projection.go) that records what it added, so that removing a
// binding takes away exactly that. ClusterWorkloadResourceMappings say
// where a kind keeps its Pod template (mapping.go). Two callers share it:
// the Reconciler (controller.go) projects into workloads that exist and
// takes the projection out when a binding goes, and the mutating Webhook
// (webhook.go) projects into workloads as they are admitted and sets the
// Pod annotation bindery.dev/egress, the bound endpoints bindery-cni turns
// into network grants; it answers with a patch of only the fields it wrote
// (patch.go).
//
// `bindery serve webhook` runs both (Options and Run, server.go;
// --controller=false leaves the Reconciler out); `bindery up --kubeconfig`
// runs them outside the cluster after InstallLocal has applied the CRDs
// and a webhook configuration with a local CA (local.go).
package servicebinding
