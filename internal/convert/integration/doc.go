// Package integration shows, against a real kube-apiserver with Cluster API
// v1.14's CRDs installed and its real conversion and admission webhooks
// serving, that package convert converts as Cluster API does: each v1beta1
// object written through the API server (the conversion webhook stores it
// at v1beta2) reads back at v1beta2 exactly as convert.Convert turned it
// into v1beta2 in process. It holds tests only; they share one local
// cluster started in TestMain. Package convert's own tests need none.
package integration
