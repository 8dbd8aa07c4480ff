package quiesce

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// failedCall is how kube-apiserver reports an admission webhook it called
// and could not get an answer from (its server down, refusing, timing out):
// `failed calling webhook "<name>": ...`. A webhook that answered "no" is
// reported differently (`admission webhook "<name>" denied the request`).
var failedCall = regexp.MustCompile(`failed calling webhook "([^"]+)"`)

// FailedWebhooks returns the names of the admission webhooks that err (or
// any error aggregated in its message) says the API server failed to call,
// sorted, without repeats.
func FailedWebhooks(err error) []string {
	if err == nil {
		return nil
	}
	seen := map[string]bool{}
	var names []string
	for _, m := range failedCall.FindAllStringSubmatch(err.Error(), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	return names
}

// RefreshBypass writes again each configuration in which one of the named
// webhooks holds the bypass, and returns what it wrote ("<kind> <name>").
//
// The API server was found calling those webhooks for the operator although
// their configuration tells it not to: kube-apiserver builds its matchers
// of a configuration once and keeps them until an update of that
// configuration reaches its informer; an update that lands while it is
// rebuilding from an older list can leave the older configuration's
// matchers in place, for good. Any change to the configuration drops them,
// so the write sets BypassRefreshedAnnotation to the time, and touches
// nothing else. Webhooks without the bypass (not this move's, or already
// restored) are left alone: their failures are not the bypass's to fix.
func RefreshBypass(ctx context.Context, c client.Client, webhooks []string, now time.Time) ([]string, error) {
	if len(webhooks) == 0 {
		return nil, nil
	}
	wanted := map[string]bool{}
	for _, n := range webhooks {
		wanted[n] = true
	}
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return nil, err
	}
	var refreshed []string
	for _, listed := range configs {
		if !bypassesAny(listed, wanted) {
			continue
		}
		wrote, err := updateListed(ctx, c, listed, func(cfg configuration) (bool, error) {
			if !bypassesAny(cfg, wanted) {
				return false, nil // restored meanwhile: nothing to reload
			}
			annotations := cfg.object.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[movev1alpha1.BypassRefreshedAnnotation] = now.UTC().Format(time.RFC3339Nano)
			cfg.object.SetAnnotations(annotations)
			return true, nil
		})
		if err != nil {
			return refreshed, fmt.Errorf("writing %s %s again so that the API server reloads its bypass: %w", listed.kind, listed.object.GetName(), err)
		}
		if wrote {
			refreshed = append(refreshed, fmt.Sprintf("%s %s", listed.kind, listed.object.GetName()))
		}
	}
	return refreshed, nil
}

// bypassesAny reports whether one of the wanted webhooks of cfg holds the
// bypass condition.
func bypassesAny(cfg configuration, wanted map[string]bool) bool {
	for _, e := range cfg.entries {
		if wanted[e.name] && holdsCondition(*e.matchConditions) {
			return true
		}
	}
	return false
}

func holdsCondition(conds []admissionregistrationv1.MatchCondition) bool {
	for _, mc := range conds {
		if mc.Name == BypassConditionName {
			return true
		}
	}
	return false
}
