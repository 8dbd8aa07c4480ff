// Package creator holds the operator to what the person behind a
// MoveOperation may do. The operator is a deputy: its ServiceAccount may
// read and delete every Secret and Cluster API object, scale every provider
// and rewrite the providers' webhooks, and a MoveOperation points those
// rights at a cluster its creator chooses. So a move is checked against its
// creator's own rights, twice:
//
//   - at admission, by the API server: Policy is the ValidatingAdmissionPolicy
//     the installer ships (generated from this package, so that the policy
//     and the operator ask the same questions), which admits a MoveOperation
//     only if its creator may do in the source what its spec directs, and
//     pins who the creator is in two annotations;
//   - before the move reads anything it is about, by the operator: Verify
//     makes sure that policy is installed as shipped and older than the
//     MoveOperation (else the annotations could be forged), and Needs are
//     asked for the creator with SubjectAccessReviews over the whole plan,
//     which reaches further than the spec (a cluster-scoped identity's
//     credentials in a namespace nobody named).
//
// The package only asks; it never grants, and it reads nothing but the
// policy objects and the MoveOperation it is given.
package creator
