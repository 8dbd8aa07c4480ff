// Package command is the manager binary's target-access subcommand: it
// reads its flags and the two clusters' kubeconfigs, grants the operator
// its access to the target (package targetaccess), and writes the target
// kubeconfig Secret in the source, or prints it. It says what it did, and
// everything it did not do as asked, in plain words; it never prints the
// token except in the Secret that --print asks for.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
	"github.com/move-operator/move-operator/internal/remote"
	"github.com/move-operator/move-operator/internal/targetaccess"
)

// Name is the subcommand's name on the manager's command line.
const Name = "target-access"

// DefaultSecretName is the Secret written when --secret-name is not given:
// the name the samples' MoveOperation refers to.
const DefaultSecretName = "target-kubeconfig"

// ErrUsage is returned for a command line that cannot be parsed (exit
// code 2); Run has printed what is wrong to stderr, with the usage, so the
// caller prints nothing more.
var ErrUsage = errors.New("invalid command line")

// options are the subcommand's flags.
type options struct {
	targetKubeconfig string
	targetContext    string
	sourceKubeconfig string
	sourceContext    string
	namespace        string
	secretName       string
	key              string
	duration         time.Duration
	server           string
	print            bool
	manifest         string
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.targetKubeconfig, "target-kubeconfig", "",
		"Kubeconfig of the TARGET cluster, for an identity that may create ClusterRoles and bind them there (a cluster administrator). Default: $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&o.targetContext, "target-context", "", "Context of --target-kubeconfig to use. Default: its current context.")
	fs.StringVar(&o.sourceKubeconfig, "source-kubeconfig", "",
		"Kubeconfig of the SOURCE cluster (where the operator runs), to write the Secret in. Default: $KUBECONFIG, else ~/.kube/config.")
	fs.StringVar(&o.sourceContext, "source-context", "", "Context of --source-kubeconfig to use. Default: its current context.")
	fs.StringVar(&o.namespace, "namespace", "",
		"Namespace of the Secret in the source: the namespace of the MoveOperation that will name it. Default: the source context's namespace, else \"default\".")
	fs.StringVar(&o.secretName, "secret-name", DefaultSecretName, "Name of the Secret (spec.target.kubeconfigSecretRef.name of the MoveOperation).")
	fs.StringVar(&o.key, "key", movev1alpha1.DefaultKubeconfigSecretKey, "Key of the kubeconfig in the Secret (spec.target.kubeconfigSecretRef.key).")
	fs.DurationVar(&o.duration, "duration", targetaccess.DefaultDuration,
		fmt.Sprintf("How long the token is valid (at least %s). Run the command again to replace it before it expires: a running move reads the Secret again.", targetaccess.MinDuration))
	fs.StringVar(&o.server, "server", "",
		"URL of the target's API server as the SOURCE cluster reaches it, when that differs from the one in --target-kubeconfig (a tunnel, a private address). Default: the one in --target-kubeconfig.")
	fs.BoolVar(&o.print, "print", false, "Print the Secret as YAML on stdout instead of writing it to the source (then nothing reads the source).")
	fs.StringVar(&o.manifest, "manifest", "", "Apply this manifest file instead of the one built into the binary (dist/target-access.yaml).")
}

const usage = `Usage: manager target-access [flags]

Gives move-operator its access to a TARGET cluster in one step:
  1. applies the target's side of the installer to the target (dist/target-access.yaml:
     Namespace move-operator-system, ServiceAccount move-operator-target, the ClusterRoles
     of what a move does there, the binding), with server-side apply: running it again is safe;
  2. mints a token for that ServiceAccount (TokenRequest API, valid for --duration);
  3. builds a self-contained kubeconfig (server, CA data, token) and writes it into the
     Secret --namespace/--secret-name of the SOURCE cluster (created, or its key updated),
     or prints that Secret (--print).
Then name the Secret in the MoveOperation: spec.target.kubeconfigSecretRef.name.

Example:
  manager target-access --target-context kind-target --source-context kind-source \
    --namespace default --secret-name target-kubeconfig --duration 24h

Flags:
`

// Run runs the subcommand with args (the arguments after its name). The
// manifest is what it applies unless --manifest names another. Reports go
// to stderr, and so does everything when --print puts the Secret on stdout.
func Run(ctx context.Context, args []string, manifest []byte, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var o options
	o.bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		// The flag set says what is wrong only for a flag it cannot parse;
		// an argument it stops at is said here, the same way, or the
		// command would exit 2 without a word.
		err := fmt.Errorf("%w: unexpected arguments %q: every setting is a flag", ErrUsage, fs.Args())
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return err
	}
	report := stdout
	if o.print {
		report = stderr
	}
	return o.run(ctx, manifest, report, stdout)
}

func (o *options) run(ctx context.Context, builtin []byte, report, stdout io.Writer) error {
	manifest, manifestName, err := o.readManifest(builtin)
	if err != nil {
		return err
	}
	m, err := targetaccess.ParseManifest(manifest)
	if err != nil {
		return fmt.Errorf("reading %s: %w", manifestName, err)
	}
	if err := o.check(); err != nil {
		return err
	}
	target, err := loadConfig(o.targetKubeconfig, o.targetContext)
	if err != nil {
		return fmt.Errorf("loading the target's kubeconfig: %w; point --target-kubeconfig (and --target-context) at the target cluster", err)
	}
	source, namespace, err := o.connectSource(ctx, target)
	if err != nil {
		return err
	}
	for _, w := range o.warnings(target) {
		fmt.Fprintf(report, "warning: %s\n", w)
	}
	kubeconfig, err := o.grant(ctx, target, manifest, manifestName, m, report)
	if err != nil {
		return err
	}
	if o.print {
		out, err := secretYAML(namespace, o.secretName, o.key, kubeconfig)
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	}
	if err := targetaccess.WriteSecret(ctx, source, namespace, o.secretName, o.key, kubeconfig); err != nil {
		return fmt.Errorf("%w; the target's access is granted: run the command again once the source is fixed, or give --print", err)
	}
	fmt.Fprintf(report, "wrote the kubeconfig to Secret %s/%s, key %q, in the source: name it in the MoveOperation's spec.target.kubeconfigSecretRef\n",
		namespace, o.secretName, o.key)
	return nil
}

// check refuses the flags no grant can be made with, before either
// cluster is reached.
func (o *options) check() error {
	if o.secretName == "" {
		return errors.New("--secret-name is empty: give the name the MoveOperation's spec.target.kubeconfigSecretRef.name will have")
	}
	if o.duration < targetaccess.MinDuration {
		return fmt.Errorf("--duration %s is shorter than the TokenRequest API issues: give at least %s", o.duration, targetaccess.MinDuration)
	}
	return nil
}

// connectSource returns a client of the source (nil with --print, which
// reads nothing there) and the namespace of the Secret: --namespace, else
// the source context's, else "default".
//
// The source is reached before anything is written to the target, so
// that a wrong --source-* or the same cluster twice stops the command
// before it grants anything.
func (o *options) connectSource(ctx context.Context, target *rest.Config) (client.Client, string, error) {
	var source client.Client
	namespace := o.namespace
	if !o.print {
		sourceConfig, sourceNamespace, err := loadConfigAndNamespace(o.sourceKubeconfig, o.sourceContext)
		if err != nil {
			return nil, "", fmt.Errorf("loading the source's kubeconfig: %w; point --source-kubeconfig (and --source-context) at the cluster the operator runs in, or give --print", err)
		}
		if namespace == "" {
			namespace = sourceNamespace
		}
		if source, err = newClient(sourceConfig); err != nil {
			return nil, "", fmt.Errorf("connecting to the source (%s): %w", sourceConfig.Host, err)
		}
		if err := o.checkTwoClusters(ctx, source, target, sourceConfig.Host); err != nil {
			return nil, "", err
		}
	}
	if namespace == "" {
		namespace = "default"
	}
	return source, namespace, nil
}

// grant applies the manifest to the target and mints the token, reporting
// what it did, and returns the kubeconfig. A token shorter-lived than
// --duration asked is said: the move would fail Unauthorized once it
// expires.
func (o *options) grant(ctx context.Context, target *rest.Config, manifest []byte, manifestName string, m *targetaccess.Manifest, report io.Writer) ([]byte, error) {
	kubeconfig, expires, err := targetaccess.Grant(ctx, target, manifest, targetaccess.Options{Duration: o.duration, Server: o.server})
	if err != nil {
		return nil, fmt.Errorf("granting access to the target (%s): %w", target.Host, err)
	}
	fmt.Fprintf(report, "applied %s to the target (%s): %s\n", manifestName, target.Host, strings.Join(names(m), ", "))
	fmt.Fprintf(report, "minted a token for %s, valid until %s (%s)\n",
		targetaccess.Username(m.ServiceAccount), expires.UTC().Format(time.RFC3339), time.Until(expires).Round(time.Minute))
	if short := o.duration - time.Until(expires); short > time.Minute {
		fmt.Fprintf(report, "warning: the target's API server issued the token for %s less than --duration asked (its --service-account-max-token-expiration); run this command again before %s, or the move fails Unauthorized\n",
			short.Round(time.Minute), expires.UTC().Format(time.RFC3339))
	}
	return kubeconfig, nil
}

func (o *options) readManifest(builtin []byte) ([]byte, string, error) {
	if o.manifest == "" {
		if len(builtin) == 0 {
			return nil, "", errors.New("this binary was built without dist/target-access.yaml: give --manifest")
		}
		return builtin, "dist/target-access.yaml", nil
	}
	data, err := os.ReadFile(o.manifest)
	if err != nil {
		return nil, "", fmt.Errorf("reading --manifest: %w", err)
	}
	return data, o.manifest, nil
}

// checkTwoClusters refuses a source and a target that are one cluster
// (both flags defaulting to the current context, say): the operator would
// refuse the move, after the target had been granted access for nothing.
func (o *options) checkTwoClusters(ctx context.Context, source client.Client, target *rest.Config, sourceHost string) error {
	sourceID, err := remote.ClusterID(ctx, source)
	if err != nil {
		return fmt.Errorf("reaching the source (%s): %w; check --source-kubeconfig and --source-context", sourceHost, err)
	}
	t, err := newClient(target)
	if err != nil {
		return fmt.Errorf("connecting to the target (%s): %w", target.Host, err)
	}
	targetID, err := remote.ClusterID(ctx, t)
	if err != nil {
		return fmt.Errorf("reaching the target (%s): %w; check --target-kubeconfig and --target-context", target.Host, err)
	}
	if sourceID == targetID {
		return fmt.Errorf("the source (%s) and the target (%s) are the same cluster: give --target-context or --target-kubeconfig for the target, --source-context or --source-kubeconfig for the source",
			sourceHost, target.Host)
	}
	return nil
}

// warnings are what about the target's address the user should know: the
// kubeconfig must work from the source cluster, not only from here.
func (o *options) warnings(target *rest.Config) []string {
	var out []string
	server := target.Host
	if o.server != "" {
		server = o.server
		out = append(out, fmt.Sprintf("the kubeconfig names the target as %s (--server), not %s", o.server, target.Host))
	}
	if isLoopback(server) {
		out = append(out, fmt.Sprintf("the target's address %s is a loopback address, which the operator reaches only when it runs on this host; give --server with the address the source cluster reaches the target at", server))
	}
	if target.Insecure && len(target.CAData) == 0 && target.CAFile == "" {
		out = append(out, "the target's kubeconfig skips verifying its certificate (insecure-skip-tls-verify), and so will the operator's: it warns about it in every move")
	}
	return out
}

func isLoopback(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func loadConfig(kubeconfig, context string) (*rest.Config, error) {
	cfg, _, err := loadConfigAndNamespace(kubeconfig, context)
	return cfg, err
}

// loadConfigAndNamespace loads a kubeconfig as kubectl does: the file
// given, else $KUBECONFIG, else ~/.kube/config; the context given, else
// the current one.
func loadConfigAndNamespace(kubeconfig, context string) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", err
	}
	return cfg, ns, nil
}

func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// names lists the manifest's objects for the report.
func names(m *targetaccess.Manifest) []string {
	out := make([]string, 0, len(m.Objects))
	for _, obj := range m.Objects {
		name := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String()
		if obj.GetNamespace() == "" {
			name = obj.GetName()
		}
		out = append(out, obj.GetKind()+" "+name)
	}
	return out
}

// secretYAML is the Secret as `kubectl apply -f -` takes it.
func secretYAML(namespace, name, key string, kubeconfig []byte) ([]byte, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(targetaccess.Secret(namespace, name, key, kubeconfig))
	if err != nil {
		return nil, err
	}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	return yaml.Marshal(obj)
}
