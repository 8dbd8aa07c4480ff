// Package gitops finds the GitOps tools that manage the objects a move takes
// (Flux Kustomizations and HelmReleases, Argo CD Applications), and stops and
// restarts them in the source cluster.
//
// Left running, such a manager re-applies its source after the move and
// re-creates the moved Cluster API objects in the source cluster: two
// management clusters then manage the same machines. A manager is found from
// the ownership labels and annotations its tool writes on every object it
// applies; it is stopped through its own API (Flux's spec.suspend, Argo CD's
// automated sync policy), never by scaling the tool's controllers, which
// manage much more than the moved objects.
//
// Every change is recorded on the manager itself, in the same update, as the
// replica counts of provider controllers are (see
// movev1alpha1.OriginalGitOpsSyncAnnotation): a resumed move never records
// its own change, and a rollback puts back exactly what was there.
//
// The package never writes anything but the managers' sync settings and
// that record, and never touches a manager whose objects do not move.
package gitops
