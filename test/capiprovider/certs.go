package capiprovider

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certificateAuthority plays cert-manager's part for one cluster: it signs
// each provider's webhook serving certificate, and its certificate is the
// caBundle injected into webhook configurations and CRD conversion settings.
type certificateAuthority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCertificateAuthority(name string) (*certificateAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the webhook CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating the webhook CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &certificateAuthority{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// servingCert is a webhook serving certificate and its PEM forms, for the TLS
// server and for the Secret cert-manager would have written.
type servingCert struct {
	tls     tls.Certificate
	certPEM []byte
	keyPEM  []byte
}

// issue signs a serving certificate for a Service: the API server verifies
// the name <service>.<namespace>.svc when it calls a webhook.
func (ca *certificateAuthority) issue(service, namespace, clusterIP string) (*servingCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the serving key of %s/%s: %w", namespace, service, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: service + "." + namespace + ".svc"},
		DNSNames: []string{
			service + "." + namespace + ".svc",
			service + "." + namespace + ".svc.cluster.local",
		},
		IPAddresses: []net.IP{net.ParseIP(clusterIP)},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(7 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate of %s/%s: %w", namespace, service, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &servingCert{tls: pair, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// WriteServingFiles writes tls.crt and tls.key into dir, as cert-manager
// mounts them into a webhook server's pod: a serving certificate for the
// Service namespace/service, signed by a CA of its own. For a server that
// needs its files to start and that the API server never calls.
func WriteServingFiles(dir, service, namespace string) error {
	ca, err := newCertificateAuthority(service + "-ca")
	if err != nil {
		return err
	}
	cert, err := ca.issue(service, namespace, "127.0.0.1")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), cert.certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), cert.keyPEM, 0o600)
}
