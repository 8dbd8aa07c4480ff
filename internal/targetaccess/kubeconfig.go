package targetaccess

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Names inside the kubeconfig Grant returns: one cluster, one user, one
// context, current.
const (
	kubeconfigCluster = "target"
	kubeconfigContext = "target"
)

// Endpoint is how the source cluster reaches the target's API server.
type Endpoint struct {
	// Server is the API server's URL.
	Server string
	// CAData is the PEM bundle that verifies the server's certificate;
	// empty means the system's roots.
	CAData []byte
	// TLSServerName is the name the certificate is checked against, when
	// it is not the host of Server.
	TLSServerName string
	// Insecure skips verifying the server's certificate. The operator
	// warns about a target reached so (its Secrets go to whoever answers).
	Insecure bool
}

// EndpointOf returns the endpoint of a REST config, with server, when set,
// in place of its host: the address the source cluster reaches the target
// at may differ from the one this config uses (a tunnel, a private name).
// The CA is read from the config's file when it has no CA data, so that
// the kubeconfig built from it is self-contained.
func EndpointOf(cfg *rest.Config, server string) (Endpoint, error) {
	e := Endpoint{
		Server:        cfg.Host,
		CAData:        cfg.CAData,
		TLSServerName: cfg.ServerName,
		Insecure:      cfg.Insecure,
	}
	if server != "" {
		e.Server = server
	}
	if e.Server == "" {
		return Endpoint{}, errors.New("the target's kubeconfig names no server")
	}
	if len(e.CAData) == 0 && cfg.CAFile != "" {
		ca, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return Endpoint{}, fmt.Errorf("reading the target's CA certificate, which the kubeconfig names by file: %w", err)
		}
		e.CAData = ca
	}
	if e.Insecure && len(e.CAData) > 0 {
		// A kubeconfig may not set both; the CA verifies, which is safer.
		e.Insecure = false
	}
	return e, nil
}

// Kubeconfig returns a self-contained kubeconfig that reaches the endpoint
// as user, authenticated by token: no file, no plugin, as the operator
// requires of the kubeconfig in a target Secret.
func Kubeconfig(e Endpoint, user, token string) ([]byte, error) {
	if e.Server == "" {
		return nil, errors.New("building a kubeconfig: no server")
	}
	if token == "" {
		return nil, errors.New("building a kubeconfig: no token")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigCluster] = &clientcmdapi.Cluster{
		Server:                   e.Server,
		CertificateAuthorityData: e.CAData,
		TLSServerName:            e.TLSServerName,
		InsecureSkipTLSVerify:    e.Insecure,
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[kubeconfigContext] = &clientcmdapi.Context{Cluster: kubeconfigCluster, AuthInfo: user}
	cfg.CurrentContext = kubeconfigContext
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("building a kubeconfig: %w", err)
	}
	return out, nil
}
