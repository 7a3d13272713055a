package deploy

import "embed"

// ServiceBinding holds deploy/servicebinding's CRDs (crd/*.yaml) and
// mutating webhook configuration (webhook.yaml), which `bindery up`
// installs in the cluster it is given.
//
//go:embed servicebinding/crd/*.yaml servicebinding/webhook.yaml
var ServiceBinding embed.FS
