package installed

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Process settles how the manager runs outside a pod.
type Process struct {
	// Binary is the manager's binary (ManagerBinary).
	Binary string
	// Identity is the operator's identity in the source (Grant).
	Identity *Identity
	// MetricsAddress and ProbeAddress replace the Deployment's addresses:
	// processes share the host's network. Default "0" (off).
	MetricsAddress, ProbeAddress string
	// Args are flags a test adds after the Deployment's (a later flag wins):
	// timings of a test's own, what a benchmark measures. Each caller says
	// why it needs them.
	Args []string
	// Env is added to the Deployment's env (e.g. a benchmark's GOMEMLIMIT).
	Env []string
}

// Command returns the manager's command: the Deployment's command and args
// with the addresses replaced and the pod's namespace made explicit, its
// env resolved as the kubelet would, and the identity's kubeconfig. The
// process dies with its parent.
func (in *Install) Command(p Process) (*exec.Cmd, error) {
	if p.Binary == "" || p.Identity == nil {
		return nil, fmt.Errorf("installed: Process needs a Binary and an Identity")
	}
	args, err := in.Args(p)
	if err != nil {
		return nil, err
	}
	env, err := in.Env()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(p.Binary, args...)
	cmd.Env = append(append(append(os.Environ(), env...), p.Env...), "KUBECONFIG="+p.Identity.Kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// Args are the manager's args for p: the Deployment's, with the metrics and
// probe addresses replaced, --leader-election-namespace set to the pod's
// namespace unless the Deployment sets it, then p.Args.
func (in *Install) Args(p Process) ([]string, error) {
	c, err := in.Manager()
	if err != nil {
		return nil, err
	}
	if len(c.Command) != 1 {
		return nil, fmt.Errorf("%s: the manager container's command is %q; expected the binary alone", InstallPath, c.Command)
	}
	replace := map[string]string{
		"--metrics-bind-address":      orOff(p.MetricsAddress),
		"--health-probe-bind-address": orOff(p.ProbeAddress),
	}
	var out []string
	namespaceSet := false
	for _, a := range c.Args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := replace[name]; ok {
			a = name + "=" + v
		}
		namespaceSet = namespaceSet || name == "--leader-election-namespace"
		out = append(out, a)
	}
	if !namespaceSet {
		// In a pod the manager reads its namespace from the ServiceAccount
		// files; here it is said.
		out = append(out, "--leader-election-namespace="+in.Deployment.Namespace)
	}
	return append(out, p.Args...), nil
}

func orOff(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// Env is the manager container's env as NAME=value, resolved as the kubelet
// resolves it; a source this harness cannot resolve is an error, so that a
// new env entry is not silently left out.
func (in *Install) Env() ([]string, error) {
	c, err := in.Manager()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			limit, ok := c.Resources.Limits["memory"]
			if !ok {
				return nil, fmt.Errorf("%s: env %s reads limits.memory, which the manager container does not set", InstallPath, e.Name)
			}
			out = append(out, e.Name+"="+strconv.FormatInt(bytesOf(limit), 10))
		default:
			return nil, fmt.Errorf("%s: env %s of the manager container comes from a source the test harness does not resolve; teach test/installed", InstallPath, e.Name)
		}
	}
	return out, nil
}

// EnvValue is the value the Deployment gives the manager's variable name,
// resolved as Env resolves it, or "" when it sets none.
func (in *Install) EnvValue(name string) (string, error) {
	env, err := in.Env()
	if err != nil {
		return "", err
	}
	for _, e := range env {
		if value, ok := strings.CutPrefix(e, name+"="); ok {
			return value, nil
		}
	}
	return "", nil
}

func bytesOf(q resource.Quantity) int64 { return q.Value() }
