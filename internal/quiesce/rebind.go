package quiesce

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// usernameOf returns the username a bypass condition's expression lets
// through, as BypassExpression wrote it; false for any other expression
// (one edited by hand).
func usernameOf(expression string) (string, bool) {
	quoted, ok := strings.CutPrefix(expression, bypassExpressionPrefix)
	if !ok {
		return "", false
	}
	username, err := strconv.Unquote(quoted)
	if err != nil || username == "" {
		return "", false
	}
	return username, true
}

// BypassedUsernames returns the usernames the bypass conditions of the
// cluster's webhooks let through, sorted, without repeats: the identities
// the bypass was installed for. A bypass condition whose expression is not
// one this package writes counts as the username "" (unknown).
func BypassedUsernames(ctx context.Context, c client.Reader) ([]string, error) {
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, cfg := range configs {
		for _, e := range cfg.entries {
			for _, mc := range *e.matchConditions {
				if mc.Name == BypassConditionName {
					username, _ := usernameOf(mc.Expression)
					seen[username] = true
				}
			}
		}
	}
	return sortedKeys(seen), nil
}

// Rebound is what RebindBypass changed.
type Rebound struct {
	// From are the usernames the rewritten conditions let through before
	// ("" for an expression this package did not write), sorted.
	From []string
	// Configurations are the configurations written ("<kind> <name>").
	Configurations []string
}

// RebindBypass makes every bypass condition of the cluster's webhooks let
// username through instead of whichever identity it names: the operator's
// credential for the cluster now authenticates as another user (a target
// Secret rotated to another ServiceAccount's token, the operator run under
// another ServiceAccount), and the bypass follows it.
//
// Each condition is rewritten in place, one update per configuration, so a
// webhook never holds a bypass for both identities, nor loses its bypass
// on the way: before the write it lets the old identity through, after it
// the new one. A crash between two configurations leaves some naming the
// old identity; a call after the restart rewrites those. Nothing else
// changes: webhooks without the bypass do not get one (installing it is
// InstallBypass's work, for the webhooks of stopped controllers), and the
// removal of the bypass (RemoveBypass) goes by the condition's name, so it
// removes it whatever identity it names.
func RebindBypass(ctx context.Context, c client.Client, username string) (Rebound, error) {
	if username == "" {
		return Rebound{}, errors.New("moving the webhook bypass to the operator's identity: the operator's username is unknown")
	}
	want := BypassExpression(username)
	configs, err := listConfigurations(ctx, c)
	if err != nil {
		return Rebound{}, err
	}
	from := map[string]bool{}
	var out Rebound
	for _, listed := range configs {
		if !namesOther(listed, want) {
			continue
		}
		wrote, err := updateListed(ctx, c, listed, func(cfg configuration) (bool, error) {
			changed := false
			for _, e := range cfg.entries {
				for i := range *e.matchConditions {
					mc := &(*e.matchConditions)[i]
					if mc.Name != BypassConditionName || mc.Expression == want {
						continue
					}
					old, _ := usernameOf(mc.Expression)
					from[old] = true
					mc.Expression = want
					changed = true
				}
			}
			return changed, nil
		})
		if err != nil {
			return out, fmt.Errorf("moving the webhook bypass of %s %s to %s: %w", listed.kind, listed.object.GetName(), username, err)
		}
		if wrote {
			out.Configurations = append(out.Configurations, fmt.Sprintf("%s %s", listed.kind, listed.object.GetName()))
		}
	}
	out.From = sortedKeys(from)
	return out, nil
}

// namesOther reports whether a webhook of cfg holds a bypass condition
// other than want.
func namesOther(cfg configuration, want string) bool {
	for _, e := range cfg.entries {
		for _, mc := range *e.matchConditions {
			if mc.Name == BypassConditionName && mc.Expression != want {
				return true
			}
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
