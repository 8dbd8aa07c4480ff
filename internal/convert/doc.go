// Package convert converts Cluster API objects from the version one
// management cluster stores them at to the version another stores them at,
// in the operator's process, with Cluster API's own conversion code: the
// converters its conversion webhooks serve (sigs.k8s.io/cluster-api
// core/webhooks/conversion and the kubeadm bootstrap and control plane
// ones), decoding into the source version's Go type, converting through the
// hub and encoding the result, statuses included.
//
// It exists because a move from an older Cluster API (contract v1beta1) into
// a newer one (storage v1beta2) cannot ask the target's conversion webhooks:
// they are served by the provider Deployments the move stops. Converting
// here, with the same code those webhooks run, gives the target the object
// its own webhook would have stored.
//
// It never maps a field itself, and never converts a provider's kinds
// (infrastructure, other bootstrap or control plane providers): their
// conversion lives only in their provider, so Convert refuses them by name
// (UnsupportedError) and a move needs both clusters to store them at one
// version.
//
// The way back (the hub, v1beta2, to an older version) is Cluster API's code
// too, with one thing only the caller knows: the API version a v1beta1
// reference names for a referenced kind (ReferenceVersions). What the older
// version cannot hold goes, as Cluster API does it, into the annotation
// cluster.x-k8s.io/conversion-data; Lost says which fields live only there.
// Cluster API's conversion packages ask a process-wide function for those
// versions: the first conversion back points it at the ReferenceVersions of
// each call, so a process that also serves Cluster API's conversion webhooks
// in-process (a test harness) gives the webhooks' answer to
// SetWebhookReferenceVersions rather than to Cluster API's setters.
//
// Convert and Lost are safe for concurrent use; they only read.
package convert
