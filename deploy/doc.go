// Package deploy holds no code: its tests check that the Kubernetes manifests and the Helm chart
// in this directory decode strictly into the Kubernetes API types and carry a valid ragwatch
// config.
package deploy
