// Package move holds the operations a MoveOperation's phases perform on the
// two clusters: pause and unpause, wait for block-move to clear, copy one
// creation group to the target, delete one group from the source, check
// provisioning, check the copies with the target's webhooks, and roll the
// target back.
//
// Every operation is idempotent and safe to repeat after a crash at any
// point, because it decides what to do from what the clusters hold (the
// operation's field manager on its copies, the copies it recorded, the
// paused-by annotation, the objects' UIDs) and never
// from memory of a previous attempt: an object this operation already
// created is progress, an object already deleted is progress, a pause it
// already made is recognised as its own.
//
// Operations take what they need (one shared client per cluster, the plan
// from package graph, an operation UID, options) and never a reconciler;
// they read and write every object at its kind's storage version. Clients
// must read from the API server, not from an informer cache. The package
// never scales Deployments or touches webhook configurations: that is the
// quiescing package's job.
package move
