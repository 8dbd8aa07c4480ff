// Package acrosscontracts holds cluster tests of moves from an older Cluster
// API into a newer one (see package movetest): a source whose Cluster API
// kinds are stored at v1beta1, as Cluster API v1.10 (the last release of
// the v1beta1 contract) stores them, moved into a target running v1.14,
// which stores them at v1beta2, every object converted in the operator
// with Cluster API's own code while the target's providers, and so its
// conversion webhooks, are stopped. It is a package of its own, with its
// own pair of local clusters, because its source does not serve the Cluster
// API the other packages' sources serve. The package has no code of its
// own.
package acrosscontracts
