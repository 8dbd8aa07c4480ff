// Package recovery holds cluster tests of the MoveOperation reconciler (see
// package movetest) split off package controllers' to run beside them, each
// package with a pair of local clusters of its own: moves and rollbacks
// that recover from a fault (the operator crashed at every write of a
// rollback, of a backup and of its restore, or restarted in one, a leader killed, a target or a webhook
// bypass that goes away, a provider already at zero), and moves of setups
// whose controllers another manager (cluster-api-operator, real or a
// stand-in) runs. The package has no code of its own.
package recovery
