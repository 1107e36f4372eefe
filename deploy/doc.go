// Package deploy holds the tests of the reference deployment beside it: the
// Kubernetes manifests (kubernetes/) decoded strictly into the Kubernetes
// API types, and the systemd units (systemd/) checked by systemd-analyze.
//
// It is a module of its own so that the product's module does not take the
// Kubernetes API's dependencies. The deployment itself is documented in
// docs/DEPLOY.md.
package deploy
