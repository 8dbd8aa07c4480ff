// Package upgradebymoving holds the test of an upgrade by moving with every
// controller live: a workload cluster provisioned by Cluster API v1.10.9's
// released managers and the loop provider (v1beta1 contract) in the source
// (testenv.Options.OlderClusterAPIInSource) is moved by the operator, as
// users install it, into a target running Cluster API v1.14.2, converted on
// the way, and the target's controllers take it over with no Machine
// replaced; and back. The package has no code of its own.
package upgradebymoving
