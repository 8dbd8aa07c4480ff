package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The defaults the CRD's markers give the spec, for code that reads a spec
// the API server did not default (one built in Go, or stored before a field
// existed). The markers cannot name Go constants, so TestTheDefaultsAreTheCRDs
// checks each one against the generated CRD: a default is stated in the
// marker and here, and nowhere else.
const (
	// DefaultScaleDownTimeout is spec.timeouts.scaleDown's default.
	DefaultScaleDownTimeout = 5 * time.Minute
	// DefaultScaleUpTimeout is spec.timeouts.scaleUp's default.
	DefaultScaleUpTimeout = 10 * time.Minute
	// DefaultBlockMoveTimeout is spec.timeouts.blockMove's default.
	DefaultBlockMoveTimeout = 10 * time.Minute
	// DefaultCopyTimeout is spec.timeouts.copy's default.
	DefaultCopyTimeout = 10 * time.Minute
	// DefaultFallbackReplicas is spec.controllers.fallbackReplicas' default.
	DefaultFallbackReplicas int32 = 1
	// DefaultObjectStatusPolicy is spec.objectStatusPolicy's default.
	DefaultObjectStatusPolicy = ObjectStatusRebuild
)

// ScaleDownTimeout is spec.timeouts.scaleDown, or its default.
func (t TimeoutsSpec) ScaleDownTimeout() time.Duration {
	return durationOr(t.ScaleDown, DefaultScaleDownTimeout)
}

// ScaleUpTimeout is spec.timeouts.scaleUp, or its default.
func (t TimeoutsSpec) ScaleUpTimeout() time.Duration {
	return durationOr(t.ScaleUp, DefaultScaleUpTimeout)
}

// BlockMoveTimeout is spec.timeouts.blockMove, or its default.
func (t TimeoutsSpec) BlockMoveTimeout() time.Duration {
	return durationOr(t.BlockMove, DefaultBlockMoveTimeout)
}

// CopyTimeout is spec.timeouts.copy, or its default.
func (t TimeoutsSpec) CopyTimeout() time.Duration {
	return durationOr(t.Copy, DefaultCopyTimeout)
}

// KeyOrDefault is the key of the kubeconfig in the Secret, or its default.
func (r SecretKeyReference) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultKubeconfigSecretKey
	}
	return r.Key
}

// FallbackReplicasOrDefault is spec.controllers.fallbackReplicas, or its
// default.
func (c ControllersSpec) FallbackReplicasOrDefault() int32 {
	return ptr.Deref(c.FallbackReplicas, DefaultFallbackReplicas)
}

// ObjectStatusPolicyOrDefault is spec.objectStatusPolicy, or the
// deprecated spec.status when only that is set (a manifest written before
// the rename), or the default. The CRD refuses the two set apart.
func (s MoveOperationSpec) ObjectStatusPolicyOrDefault() ObjectStatusPolicy {
	switch {
	case s.ObjectStatusPolicy != "":
		return s.ObjectStatusPolicy
	case s.DeprecatedStatus != "":
		return s.DeprecatedStatus
	}
	return DefaultObjectStatusPolicy
}

// CarriesStatus reports whether the move writes the source's status to
// the copies (spec.objectStatusPolicy Carry).
func (s MoveOperationSpec) CarriesStatus() bool {
	return s.ObjectStatusPolicyOrDefault() == ObjectStatusCarry
}

// durationOr is d, or fallback when d is unset (or not positive, which the
// CRD's validation refuses, but a spec built in Go may hold).
func durationOr(d *metav1.Duration, fallback time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return fallback
	}
	return d.Duration
}

// DefaultControllerSelector is spec.controllers.selector's default: every
// Deployment clusterctl labels as a provider's.
func DefaultControllerSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: DefaultControllerLabel, Operator: metav1.LabelSelectorOpExists,
	}}}
}

// SelectorOrDefault is spec.controllers.selector, or its default.
func (c ControllersSpec) SelectorOrDefault() *metav1.LabelSelector {
	if c.Selector == nil {
		return DefaultControllerSelector()
	}
	return c.Selector
}

// SelectsProviders reports whether spec.controllers.selector is its
// default: the move stops the providers, which every move does, and no
// Deployment its creator chose.
func (c ControllersSpec) SelectsProviders() bool {
	return equality.Semantic.DeepEqual(c.SelectorOrDefault(), DefaultControllerSelector())
}
