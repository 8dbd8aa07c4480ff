package installed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/move-operator/move-operator/internal/targetaccess"
)

// TokenLifetime is how long the tokens Grant requests live: longer than
// any test run, as a pod's projected token is refreshed before it expires.
const TokenLifetime = 12 * time.Hour

// Identity is the operator's identity in a cluster, as its pods have it.
type Identity struct {
	// Namespace and ServiceAccount name the ServiceAccount.
	Namespace, ServiceAccount string
	// Username is what the API server authenticates the token as.
	Username string
	// Config authenticates with the ServiceAccount's token only.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file with the same server and CA and the
	// token in a file of its own (TokenFile), as a pod's projected token.
	Kubeconfig string
	// TokenFile holds the token.
	TokenFile string
}

// Grant applies the installer's Namespace, ServiceAccount and RBAC objects
// and admission policies to the cluster admin reaches (admin credentials set
// up, nothing more), waits until its aggregated ClusterRoles hold their rules
// and its admission policies apply, and returns the ServiceAccount's identity
// with a token from the TokenRequest API. The kubeconfig and token files are
// written into dir. A document of a kind the API server does not serve is
// left out, as `kubectl apply -f dist/install.yaml` refuses it and applies
// the rest: the MutatingAdmissionPolicy and its binding before Kubernetes
// 1.36.
func (in *Install) Grant(ctx context.Context, admin *rest.Config, dir string) (*Identity, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating an admin client: %w", err)
	}
	mutating := false
	for _, obj := range in.IdentityObjects() {
		err := createOrUpdate(ctx, c, obj)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		mutating = mutating || obj.GetKind() == "MutatingAdmissionPolicyBinding"
	}
	// The manager may do nothing until the aggregation controller has
	// filled its bound role.
	if err := targetaccess.WaitForAggregation(ctx, admin, in.raw, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", InstallPath, err)
	}
	ns, sa := in.ServiceAccount()
	if err := waitForAdmission(ctx, admin, c, ns, mutating); err != nil {
		return nil, err
	}
	return TokenFor(ctx, admin, ns, sa, dir)
}

// TokenFor requests a token for a ServiceAccount and returns its identity.
func TokenFor(ctx context.Context, admin *rest.Config, namespace, serviceAccount, dir string) (*Identity, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(TokenLifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, serviceAccount, err)
	}
	cfg := Anonymous(admin)
	cfg.BearerToken = tr.Status.Token
	id := &Identity{
		Namespace: namespace, ServiceAccount: serviceAccount,
		Username: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount),
		Config:   cfg,
	}
	if err := id.writeFiles(dir, admin); err != nil {
		return nil, err
	}
	return id, nil
}

// Impersonating copies the admin's config to act as user: what RBAC and
// admission see is that user alone (the API server adds
// system:authenticated), as when the user runs kubectl. For tests of who
// may do what; setting up stays with the admin.
func Impersonating(admin *rest.Config, user string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// Anonymous copies a config's server, CA and client limits, and none of
// its credentials.
func Anonymous(cfg *rest.Config) *rest.Config {
	return &rest.Config{
		Host:            cfg.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData, CAFile: cfg.CAFile, ServerName: cfg.ServerName},
		QPS:             cfg.QPS,
		Burst:           cfg.Burst,
	}
}

func (id *Identity) writeFiles(dir string, admin *rest.Config) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	id.TokenFile = filepath.Join(dir, id.ServiceAccount+".token")
	if err := os.WriteFile(id.TokenFile, []byte(id.Config.BearerToken), 0o600); err != nil {
		return fmt.Errorf("writing the token file: %w", err)
	}
	caData := admin.CAData
	if len(caData) == 0 && admin.CAFile != "" {
		var err error
		if caData, err = os.ReadFile(admin.CAFile); err != nil {
			return fmt.Errorf("reading the cluster's CA: %w", err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: caData}
	kc.AuthInfos[id.ServiceAccount] = &clientcmdapi.AuthInfo{TokenFile: id.TokenFile}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: id.ServiceAccount}
	kc.CurrentContext = "operator"
	id.Kubeconfig = filepath.Join(dir, id.ServiceAccount+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, id.Kubeconfig); err != nil {
		return fmt.Errorf("writing the operator's kubeconfig: %w", err)
	}
	return nil
}

// createOrUpdate creates obj, or replaces what is stored under its name.
func createOrUpdate(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	err := c.Create(ctx, obj.DeepCopy())
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return describe(obj, err)
	}
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return describe(obj, err)
	}
	update := obj.DeepCopy()
	update.SetResourceVersion(current.GetResourceVersion())
	if isAggregated(obj) {
		// The aggregation controller owns an aggregated role's rules.
		if rules, ok, _ := unstructured.NestedSlice(current.Object, "rules"); ok {
			_ = unstructured.SetNestedSlice(update.Object, rules, "rules")
		}
	}
	return describe(obj, c.Update(ctx, update))
}

func describe(obj *unstructured.Unstructured, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("applying %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
}

func isAggregated(obj *unstructured.Unstructured) bool {
	_, found, _ := unstructured.NestedMap(obj.Object, "aggregationRule")
	return obj.GetKind() == "ClusterRole" && found
}
