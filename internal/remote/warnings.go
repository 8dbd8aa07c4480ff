package remote

import (
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// OnceEachWarning returns a handler that logs each distinct warning an API
// server returns once. A move writes thousands of objects of a few kinds,
// and the server warns about the same thing for every one of them (a
// provider's finalizer name, a deprecated field): once is all a reader of
// the log needs.
func OnceEachWarning() rest.WarningHandlerWithContext {
	return log.NewKubeAPIWarningLogger(log.KubeAPIWarningLoggerOptions{Deduplicate: true})
}
