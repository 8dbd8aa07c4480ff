// Package access says what a move needs to be allowed to do in each cluster,
// asks each cluster whether the operator's identity may do it, and names
// what is missing as the ClusterRole rules that grant it.
//
// What a move needs is data (Needs), computed from the kinds that move and
// the fixed things a move touches, so that a preflight can check it before
// the first write, the shipped roles can be tested against it, and a 403
// met later (Denied) is named the same way. Only Check and CheckAs talk to
// a cluster, and only with SelfSubjectAccessReviews (the operator's own
// rights) and SubjectAccessReviews (a MoveOperation's creator's, for
// package creator): the package never reads or writes anything else, and
// never grants anything itself.
package access
