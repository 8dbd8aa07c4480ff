package remote

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Target is a client for the target cluster.
type Target struct {
	// Client reads and writes the target directly, without a cache: a move
	// reads each object once and must see what is there now.
	Client client.Client
	// Config is the REST config the client was built from.
	Config *rest.Config
	// Server is the target API server's URL, safe to show.
	Server string
	// Insecure is set when the kubeconfig skips verifying the server's
	// certificate (insecure-skip-tls-verify): used, but warned about.
	Insecure bool
	// Local is set for the cluster the operator runs in, when it is the
	// target: a restore's (no kubeconfig, no second cluster).
	Local bool
}

// Clients builds target clients from kubeconfig Secrets and keeps them while
// the Secret is unchanged (same resourceVersion, or the same kubeconfig
// under another one), so that one client, with its connection pool, serves
// every reconcile of a move.
//
// The Secret is read on every Get: a credential rotated there (a token that
// expires, replaced by whatever refreshes it) gives a new *Target at the
// next Get, and callers that keep a client across calls compare the
// pointer to follow it. A client is not dropped when the target answers
// 401 Unauthorized: the kubeconfig is self-contained (no token file, no
// plugin; see ParseKubeconfig), so a client built again from the same
// Secret would send the same credential and meet the same 401. Only a new
// kubeconfig in the Secret can mend it, and that gives a new client.
type Clients struct {
	// Reader gets the Secret. Use an uncached reader (the manager's API
	// reader): the operator then needs only "get" on Secrets.
	Reader client.Reader
	Scheme *runtime.Scheme
	// QPS and Burst limit the requests to the target.
	QPS   float32
	Burst int
	// Wrap, when set, wraps every target client built (tests count and
	// interrupt the operator's writes with it).
	Wrap func(client.Client) client.Client

	mu      sync.Mutex
	entries map[string]cachedTarget
}

type cachedTarget struct {
	resourceVersion string
	// digest is the SHA-256 of the kubeconfig the target was built from:
	// a write to the Secret that leaves the kubeconfig as it was (a label,
	// the operator's own finalizer) keeps the client.
	digest [sha256.Size]byte
	target *Target
}

// Get returns a client for the target named by ref, a Secret in namespace.
// Problems the user must fix come back as *Error with the reason to report.
func (c *Clients) Get(ctx context.Context, namespace string, ref movev1alpha1.SecretKeyReference) (*Target, error) {
	key := ref.KeyOrDefault()
	secretKey := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	secret := &corev1.Secret{}
	if err := c.Reader.Get(ctx, secretKey, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: movev1alpha1.ReasonTargetSecretNotFound, Message: fmt.Sprintf(
				"Secret %s not found: create it with the target cluster's kubeconfig under key %q (kubectl -n %s create secret generic %s --from-file=%s=<kubeconfig>)",
				secretKey, key, namespace, ref.Name, key)}
		}
		return nil, fmt.Errorf("getting target kubeconfig Secret %s: %w", secretKey, err)
	}
	data, ok := secret.Data[key]
	if !ok || len(data) == 0 {
		return nil, &Error{Reason: movev1alpha1.ReasonTargetSecretKeyNotFound, Message: fmt.Sprintf(
			"Secret %s has no key %q: put the target cluster's kubeconfig under that key, or set spec.target.kubeconfigSecretRef.key to the key that holds it (keys present: %s)",
			secretKey, key, keysOf(secret))}
	}

	cacheKey := secretKey.String() + "#" + key
	digest := sha256.Sum256(data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[cacheKey]; ok && (e.resourceVersion == secret.ResourceVersion || e.digest == digest) {
		e.resourceVersion = secret.ResourceVersion
		c.entries[cacheKey] = e
		return e.target, nil
	}
	cfg, err := ParseKubeconfig(data, fmt.Sprintf("Secret %s key %q", secretKey, key))
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.WarningHandlerWithContext = OnceEachWarning()
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, fmt.Errorf("building a client for the target %s: %w", cfg.Host, err)
	}
	if c.Wrap != nil {
		cl = c.Wrap(cl)
	}
	t := &Target{Client: cl, Config: cfg, Server: cfg.Host, Insecure: cfg.Insecure}
	if c.entries == nil {
		c.entries = map[string]cachedTarget{}
	}
	c.entries[cacheKey] = cachedTarget{resourceVersion: secret.ResourceVersion, digest: digest, target: t}
	return t, nil
}

func keysOf(s *corev1.Secret) string {
	if len(s.Data) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// ClusterID identifies a cluster: the UID of its kube-system namespace,
// which no address, name or credential of the cluster changes.
func ClusterID(ctx context.Context, c client.Reader) (types.UID, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("reading namespace kube-system: %w", err)
	}
	return ns.UID, nil
}
