package quiesce

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reassert makes the bypass hold again in one cluster after the API server
// called webhooks for the operator (failed, from FailedWebhooks) that the
// bypass should have let it past, and says what it wrote, if anything:
//
//   - while the stopped controllers are meant to be down there (down), a
//     webhook they serve (served) that lost its bypass (somebody applied
//     the provider's manifests again: a GitOps tool, an installer) gets it
//     back, for the username the callback gives (asked only then);
//   - a webhook that holds the bypass and was called all the same means the
//     API server is using its configuration from before the bypass (see
//     RefreshBypass): the configuration is written again so that it
//     reloads it.
//
// where names the cluster in what it says ("source cluster").
func Reassert(ctx context.Context, c client.Client, where string, served []WebhookRef, username func() (string, error), failed []string, down bool) (string, error) {
	called := strings.Join(failed, ", ")
	if down {
		reinstalled, err := reinstall(ctx, c, served, username, failed)
		if err != nil {
			return "", err
		}
		if len(reinstalled) > 0 {
			return fmt.Sprintf("webhooks this move bypasses were called for the operator (%s): the bypass had been removed from the %s's %s; installed it again",
				called, where, strings.Join(reinstalled, ", ")), nil
		}
	}
	refreshed, err := RefreshBypass(ctx, c, failed, time.Now())
	if len(refreshed) == 0 {
		return "", err
	}
	return fmt.Sprintf("webhooks this move bypasses were called for the operator (%s); wrote the %s's %s again so that its API server reloads them (it may hold them as they were before the bypass)",
		called, where, strings.Join(refreshed, ", ")), err
}

// reinstall installs the bypass again on those of the failed webhooks that
// the stopped controllers serve.
func reinstall(ctx context.Context, c client.Client, served []WebhookRef, username func() (string, error), failed []string) ([]string, error) {
	named := map[string]bool{}
	for _, n := range failed {
		named[n] = true
	}
	var refs []WebhookRef
	for _, ref := range served {
		if named[ref.Webhook] {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	who, err := username()
	if err != nil {
		return nil, err
	}
	return InstallBypass(ctx, c, refs, who)
}

// RemoveBypassOfRunning removes the bypass from the webhooks served by the
// restored controllers that run (replicas above zero): they check what
// follows. Those of a controller that stays at zero (as the user left it)
// are down, and keep letting the operator through.
func RemoveBypassOfRunning(ctx context.Context, c client.Client, restored []Controller) error {
	var running []Controller
	for _, ctrl := range restored {
		if ctrl.Replicas > 0 {
			running = append(running, ctrl)
		}
	}
	if len(running) == 0 {
		return nil
	}
	wh, err := FindWebhooks(ctx, c, running)
	if err != nil {
		return err
	}
	return RemoveBypassFrom(ctx, c, wh.Served)
}
