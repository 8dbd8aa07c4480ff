// Package integration shows, against a real kube-apiserver with the
// installer's RBAC and admission policies applied, who may create which
// MoveOperation: real users (impersonated, never admin) are refused or
// admitted by the API server itself, before the operator sees anything.
// Its tests need local clusters (make test); package creator's own tests
// need none.
package integration
