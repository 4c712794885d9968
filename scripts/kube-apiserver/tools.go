//go:build tools

// Package tools pins cmd/kube-apiserver so that go mod tidy keeps its dependencies.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
