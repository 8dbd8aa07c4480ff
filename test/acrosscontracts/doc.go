// Package acrosscontracts holds cluster tests of moves from an older Cluster
// API into a newer one (see package movetest): a source whose Cluster API
// kinds are stored at v1beta1, as Cluster API v1.10 (the last release of
// the v1beta1 contract) stores them, moved into a target running v1.14,
// which stores them at v1beta2, every object converted in the operator
// with Cluster API's own code while the target's providers, and so its
// conversion webhooks, are stopped. And the way back: a source storing them
// at v1beta2 moved into a target given v1.10's CRDs, each object converted
// back, or the move refused before anything stops when an object holds what
// v1beta1 cannot. It is a package of its own, with its own pair of local
// clusters, because its source does not serve the Cluster API the other
// packages' sources serve. The package has no code of its own.
package acrosscontracts
