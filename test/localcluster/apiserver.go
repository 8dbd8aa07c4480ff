package localcluster

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// APIServerOptions tune StartAPIServer.
type APIServerOptions struct {
	// BinaryDir holds the Kubernetes binaries. Default: BinaryDir(ctx).
	BinaryDir string
	// CACert and CAKey (PEM) are the cluster's certificate authority, as
	// kubeadm sets one up: it signs the API server's serving certificate,
	// and every client certificate it signs authenticates (the CN is the
	// user, the Os its groups). Required.
	CACert, CAKey []byte
	// StartTimeout bounds the start. Default 2m.
	StartTimeout time.Duration
	// Logf receives progress lines. Default: discarded.
	Logf func(format string, args ...any)
}

// APIServer is a bare control plane on loopback: etcd and kube-apiserver,
// nothing else (no controller manager, scheduler or nodes of its own).
type APIServer struct {
	// Name names the server in messages and its directory.
	Name string
	// Host and Port are where it serves (a loopback address).
	Host string
	Port int
	// Config is a system:masters client configuration.
	Config *rest.Config
	// LogDir holds etcd.log and kube-apiserver.log; it survives Stop.
	LogDir string
	// StartupDuration is how long the start took.
	StartupDuration time.Duration

	dir      string
	env      *envtest.Environment
	launcher *launcher
	authn    *caAuthn
	logs     []*os.File
	stopOnce sync.Once
	stopErr  error
}

// StartAPIServer starts etcd and kube-apiserver, with the given CA as the
// cluster's one certificate authority, and returns when the API server
// answers. Its processes die with the test process, as a local cluster's do.
func StartAPIServer(ctx context.Context, name string, opts APIServerOptions) (_ *APIServer, err error) {
	began := time.Now()
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	authn, err := newCAAuthn(opts.CACert, opts.CAKey)
	if err != nil {
		return nil, fmt.Errorf("API server %s: %w", name, err)
	}
	binDir := opts.BinaryDir
	if binDir == "" {
		if binDir, err = BinaryDir(ctx); err != nil {
			return nil, err
		}
	}
	removeStaleDirs()
	dir, err := os.MkdirTemp("", dirPrefix+name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating the directory of API server %s: %w", name, err)
	}
	if err := writeOwner(dir); err != nil {
		return nil, fmt.Errorf("recording the owner of %s: %w", dir, err)
	}
	s := &APIServer{Name: name, dir: dir, LogDir: filepath.Join(dir, "logs"), launcher: newLauncher(), authn: authn}
	defer func() {
		if err != nil {
			err = errors.Join(fmt.Errorf("%w (logs in %s)", err, s.LogDir), s.Stop())
		}
	}()
	pki := filepath.Join(dir, "pki")
	for _, d := range []string{s.LogDir, filepath.Join(dir, "bin"), filepath.Join(dir, "etcd"), pki} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.Host, s.Port = "127.0.0.1", port
	if err := authn.writeServingFiles(pki, s.Host); err != nil {
		return nil, err
	}

	etcdWrapper, apiWrapper, err := writeWrappers(dir, binDir)
	if err != nil {
		return nil, err
	}
	logs, err := s.openLogs()
	if err != nil {
		return nil, err
	}
	s.env = s.environment(binDir, etcdWrapper, apiWrapper, logs, opts.StartTimeout)
	var startErr error
	s.launcher.do(func() { _, startErr = s.env.Start() })
	if startErr != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver of API server %s: %w", name, startErr)
	}
	user, err := s.env.ControlPlane.AddUser(envtest.User{Name: "move-operator-admin", Groups: []string{"system:masters"}},
		&rest.Config{QPS: 500, Burst: 1000})
	if err != nil {
		return nil, fmt.Errorf("provisioning the admin of API server %s: %w", name, err)
	}
	s.Config = rest.CopyConfig(user.Config())
	s.StartupDuration = time.Since(began)
	opts.Logf("API server %s ready at %s:%d in %s (logs %s)", name, s.Host, s.Port, s.StartupDuration.Round(time.Millisecond), s.LogDir)
	return s, nil
}

// writeWrappers writes, in dir's bin, the wrappers that exec etcd and
// kube-apiserver from binDir, and returns their paths.
func writeWrappers(dir, binDir string) (etcdWrapper, apiWrapper string, err error) {
	etcdWrapper, apiWrapper = filepath.Join(dir, "bin", etcdBinary), filepath.Join(dir, "bin", apiServerBinary)
	if err := writeExecWrapper(etcdWrapper, filepath.Join(binDir, etcdBinary)); err != nil {
		return "", "", err
	}
	if err := writeExecWrapper(apiWrapper, filepath.Join(binDir, apiServerBinary)); err != nil {
		return "", "", err
	}
	return etcdWrapper, apiWrapper, nil
}

// openLogs opens the logs of etcd and kube-apiserver, in that order, which
// Stop closes.
func (s *APIServer) openLogs() ([2]*os.File, error) {
	var logs [2]*os.File
	for i, component := range []string{etcdBinary, apiServerBinary} {
		f, err := os.OpenFile(filepath.Join(s.LogDir, component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return logs, fmt.Errorf("opening the %s log: %w", component, err)
		}
		s.logs = append(s.logs, f)
		logs[i] = f
	}
	return logs, nil
}

// AuditEnv, set to anything, makes every API server write an audit log of
// every request's metadata to audit.log in its LogDir.
const AuditEnv = "MOVE_OPERATOR_AUDIT"

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  resources:
  - group: authorization.k8s.io
- level: Metadata
`

// auditIfAsked makes the API server write every request's user, verb and
// resource to audit.log in logDir when AuditEnv is set: a measurement aid
// to find who makes which requests, off by default (it costs CPU).
func auditIfAsked(apiServer *envtest.APIServer, dir, logDir string) {
	if os.Getenv(AuditEnv) == "" {
		return
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return
	}
	apiServer.Configure().Set("audit-policy-file", policy)
	apiServer.Configure().Set("audit-log-path", filepath.Join(logDir, "audit.log"))
}

// environment configures envtest to run etcd and kube-apiserver, through
// their wrappers, as a bare control plane on s.Host and s.Port.
func (s *APIServer) environment(binDir, etcdWrapper, apiWrapper string, logs [2]*os.File, startTimeout time.Duration) *envtest.Environment {
	dir, pki := s.dir, filepath.Join(s.dir, "pki")
	etcd := &envtest.Etcd{Path: etcdWrapper, DataDir: filepath.Join(dir, "etcd"), Out: logs[0], Err: logs[0]}
	etcd.Configure().Set("unsafe-no-fsync", "true")
	apiServer := &envtest.APIServer{Path: apiWrapper, CertDir: pki, Out: logs[1], Err: logs[1]}
	apiServer.SecureServing = envtest.SecureServing{
		ListenAddr: envtest.ListenAddr{Address: s.Host, Port: fmt.Sprint(s.Port)},
		Authn:      s.authn,
		CA:         s.authn.caPEM,
	}
	// No controller manager signs ServiceAccount tokens, and no node
	// lifecycle controller lifts the not-ready taint: neither plugin fits.
	apiServer.Configure().Set("disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
	apiServer.Configure().Set("service-cluster-ip-range", "127.95.0.0/24")
	// Loopback only, and no drawn-out shutdown: nothing balances load here.
	apiServer.Configure().Set("advertise-address", s.Host)
	apiServer.Configure().Set("shutdown-delay-duration", "0s")
	apiServer.Configure().Set("shutdown-watch-termination-grace-period", "0s")
	auditIfAsked(apiServer, dir, s.LogDir)
	return &envtest.Environment{
		ControlPlane:             envtest.ControlPlane{Etcd: etcd, APIServer: apiServer},
		BinaryAssetsDirectory:    binDir,
		UseExistingCluster:       ptr.To(false),
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
}

// URL is the server's https URL.
func (s *APIServer) URL() string { return fmt.Sprintf("https://%s:%d", s.Host, s.Port) }

// Stop stops kube-apiserver and etcd and removes their data, keeping LogDir.
func (s *APIServer) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.env != nil {
			if err := stopControlPlane(s.env); err != nil {
				errs = append(errs, fmt.Errorf("stopping API server %s: %w", s.Name, err))
			}
		}
		s.launcher.close()
		for _, f := range s.logs {
			_ = f.Close()
		}
		for _, d := range []string{"bin", "etcd", "pki"} {
			if err := os.RemoveAll(filepath.Join(s.dir, d)); err != nil {
				errs = append(errs, err)
			}
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// RemoveLogs deletes the server's directory; call it after Stop.
func (s *APIServer) RemoveLogs() error {
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing the logs of API server %s: %w", s.Name, err)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// caAuthn is an envtest authenticator whose client CA is the cluster's CA,
// so that certificates signed elsewhere with that CA (such as the admin
// kubeconfigs Cluster API writes) authenticate too.
type caAuthn struct {
	cert  *x509.Certificate
	key   crypto.Signer
	caPEM []byte
}

var _ envtest.Authn = &caAuthn{}

func newCAAuthn(certPEM, keyPEM []byte) (*caAuthn, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, errors.New("the CA certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	keyBlock, _ := pem.Decode(keyPEM)
	if keyBlock == nil {
		return nil, errors.New("the CA key is not PEM")
	}
	var key crypto.Signer
	if k, err := x509.ParseECPrivateKey(keyBlock.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS1PrivateKey(keyBlock.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes); err == nil {
		signer, ok := k.(crypto.Signer)
		if !ok {
			return nil, errors.New("the CA key cannot sign")
		}
		key = signer
	} else {
		return nil, fmt.Errorf("parsing the CA key: %w", err)
	}
	return &caAuthn{cert: cert, key: key, caPEM: certPEM}, nil
}

func (a *caAuthn) Configure(workDir string, args *envtest.Arguments) error {
	path := filepath.Join(workDir, "client-ca.crt")
	if err := os.WriteFile(path, a.caPEM, 0o640); err != nil {
		return fmt.Errorf("writing the client CA: %w", err)
	}
	args.Set("client-ca-file", path)
	return nil
}

func (a *caAuthn) Start() error { return nil }

func (a *caAuthn) Stop() error { return nil }

func (a *caAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	certPEM, keyPEM, err := a.issue(pkix.Name{CommonName: user.Name, Organization: user.Groups}, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, fmt.Errorf("issuing a client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	return cfg, nil
}

// writeServingFiles writes what envtest would generate itself: the serving
// certificate (here signed by the cluster CA) and the ServiceAccount
// signing key pair.
func (a *caAuthn) writeServingFiles(dir, host string) error {
	certPEM, keyPEM, err := a.issue(pkix.Name{CommonName: "kube-apiserver"}, []string{host, "localhost"}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return fmt.Errorf("issuing the API server's serving certificate: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"apiserver.crt": certPEM,
		"apiserver.key": keyPEM,
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}),
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// issue signs a one-year certificate with the CA.
func (a *caAuthn) issue(subject pkix.Name, hosts []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// AddUser provisions a client certificate user with the given groups,
// signed by the cluster CA, and returns its client configuration.
func (s *APIServer) AddUser(name string, groups ...string) (*rest.Config, error) {
	user, err := s.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: 500, Burst: 1000})
	if err != nil {
		return nil, fmt.Errorf("provisioning user %s of API server %s: %w", name, s.Name, err)
	}
	return rest.CopyConfig(user.Config()), nil
}
