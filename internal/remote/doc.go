// Package remote turns the target cluster's kubeconfig Secret into a client.
//
// It accepts only self-contained kubeconfigs: exec and auth-provider plugins
// would run code or reach identity providers from inside the operator's pod,
// and file references point into the operator's own file system. It never
// logs or returns the Secret's content, and reads the Secret with a plain GET,
// so the operator needs no right to list or watch Secrets.
package remote
