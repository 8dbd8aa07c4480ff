package remote

import (
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// Error is a problem with the target's access that a user must fix. Reason
// is one of the API's condition reasons.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

func invalid(format string, args ...any) *Error {
	return &Error{Reason: movev1alpha1.ReasonInvalidKubeconfig, Message: fmt.Sprintf(format, args...)}
}

// ParseKubeconfig turns kubeconfig bytes into a REST config, refusing what
// the operator must not use: exec and auth-provider plugins and references to
// files. source names where the bytes came from, for the error messages.
func ParseKubeconfig(data []byte, source string) (*rest.Config, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// The parser's message names a line, never the content.
		return nil, invalid("the kubeconfig in %s cannot be parsed: %v", source, err)
	}
	ctxName := cfg.CurrentContext
	if ctxName == "" {
		return nil, invalid("the kubeconfig in %s has no current-context: set one naming the target cluster's context", source)
	}
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		return nil, invalid("the kubeconfig in %s sets current-context %q, which it does not define", source, ctxName)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, invalid("the kubeconfig in %s: context %q names cluster %q, which it does not define", source, ctxName, kctx.Cluster)
	}
	if cluster.Server == "" {
		return nil, invalid("the kubeconfig in %s: cluster %q has no server URL", source, kctx.Cluster)
	}
	user, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil, invalid("the kubeconfig in %s: context %q names user %q, which it does not define", source, ctxName, kctx.AuthInfo)
	}
	if problems := refused(cluster, user); len(problems) > 0 {
		return nil, invalid("the kubeconfig in %s uses %s; the operator accepts only self-contained kubeconfigs: inline the certificates and key (*-data fields) or a token, for example from a ServiceAccount token",
			source, strings.Join(problems, ", "))
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, invalid("the kubeconfig in %s is not usable: %v", source, err)
	}
	// Certificates that do not parse would otherwise fail only when the
	// first client is built, with a less helpful message.
	if _, err := rest.TLSConfigFor(restCfg); err != nil {
		return nil, invalid("the kubeconfig in %s holds certificates that cannot be used: %v", source, err)
	}
	return restCfg, nil
}

// refused lists the features of the used cluster and user entries that the
// operator does not accept.
func refused(cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) []string {
	var out []string
	if user.Exec != nil {
		out = append(out, fmt.Sprintf("an exec credential plugin (%q)", user.Exec.Command))
	}
	if user.AuthProvider != nil {
		out = append(out, fmt.Sprintf("an auth-provider plugin (%q)", user.AuthProvider.Name))
	}
	if cluster.CertificateAuthority != "" {
		out = append(out, "a certificate-authority file")
	}
	if user.ClientCertificate != "" {
		out = append(out, "a client-certificate file")
	}
	if user.ClientKey != "" {
		out = append(out, "a client-key file")
	}
	if user.TokenFile != "" {
		out = append(out, "a tokenFile")
	}
	return out
}
