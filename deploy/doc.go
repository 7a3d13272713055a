// Package deploy holds Bindery's deployment files (Kubernetes manifests
// under its folders) and the tests that keep them, and the top-level
// docker-compose.yaml, valid.
package deploy
