// Package livecontrollers holds the tests of the live controllers in the
// local management clusters (testenv.Options.Controllers): the real Cluster
// API controllers and the loop provider run while their Deployments have
// Ready pods, stop gracefully when the last pod goes, and leave a settled
// fleet alone. The package has no code of its own.
package livecontrollers
