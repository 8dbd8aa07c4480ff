// Package olderkubernetes runs the operator on management clusters of
// Kubernetes 1.33, a release before MutatingAdmissionPolicy (v1 from 1.36),
// where most management clusters run today: the control plane of both local
// clusters is built at 1.33 (hack/kube-binaries.sh with KUBE_VERSION=1.33),
// the installer is applied as docs/access.md tells users of 1.30 to 1.35
// (everything but the MutatingAdmissionPolicy and its binding, which such an
// API server refuses as unknown kinds), and each creator writes the
// annotations that name them. The tests show, with real users (impersonated,
// with RBAC of their own), that the validating policy's CEL works there:
// it admits a creator who names themselves truly, and refuses one who does
// not, or whose move, backup or restore needs a right they lack, naming it;
// and that a move and a backup, created by such a user, run to Done by the
// operator as installed.
//
// Its tests need local clusters (make test builds the 1.33 binaries and
// names them with KUBEBUILDER_ASSETS_1_33). They test what differs before
// 1.36 only: everything else is tested on 1.36 by the other packages.
package olderkubernetes
