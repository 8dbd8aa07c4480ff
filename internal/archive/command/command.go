// Package command is the manager binary's archive subcommand: it lists,
// inspects and decrypts a backup offline, with nothing but the archive (a
// file, an unpacked directory, a directory clusterctl wrote, or an artifact
// in a registry) and, when it is encrypted, the private key. It never
// prints an object's content: decrypt writes it to files.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"filippo.io/age"

	"github.com/move-operator/move-operator/internal/archive"
	"github.com/move-operator/move-operator/internal/backupstore"
)

// Name is the subcommand's name on the manager's command line.
const Name = "archive"

// ErrUsage is returned for a command line that cannot be parsed (exit code
// 2); Run has printed what is wrong, with the usage.
var ErrUsage = errors.New("invalid command line")

const usage = `Usage: manager archive list|inspect|decrypt [flags] ARCHIVE

  list     prints every object of the archive, in creation order
  inspect  prints what the archive holds: when and where it was taken, its
           objects per kind, whether it is encrypted, its SHA-256
  decrypt  writes the archive's objects to --to-directory, as clusterctl move
           --to-directory writes them (DIR/objects) with the archive's index
           beside them (DIR/index.json): clusterctl move --from-directory
           DIR/objects reads it

ARCHIVE is a file a backup wrote, a directory (decrypt's, or clusterctl
move --to-directory's), or oci://REGISTRY/REPOSITORY:TAG or @sha256:...

Flags:
`

// options are the subcommand's flags.
type options struct {
	identity     string
	registryAuth string
	toDirectory  string
}

// Run runs the subcommand with args (what follows "archive"), writing to
// stdout and stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb, archiveRef, opts, err := parse(args, stderr)
	if err != nil {
		return err
	}
	a, digest, err := open(ctx, archiveRef, opts)
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		return list(stdout, a)
	case "inspect":
		return inspect(stdout, archiveRef, digest, a)
	default:
		if err := archive.Unpack(a, opts.toDirectory); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "wrote %d objects to %s/objects and the index to %s/index.json; the files hold every credential of the fleet in the clear: keep them as you keep the key\n",
			len(a.Index.Objects), opts.toDirectory, opts.toDirectory)
		return err
	}
}

func parse(args []string, stderr io.Writer) (string, string, options, error) {
	var opts options
	fs := flag.NewFlagSet(Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage) //nolint:errcheck // usage on stderr
		fs.PrintDefaults()
	}
	fs.StringVar(&opts.identity, "identity", "", "File with the age private key (AGE-SECRET-KEY-1...) of an encrypted archive; - reads it from stdin.")
	fs.StringVar(&opts.registryAuth, "registry-auth", "", "Docker config file (as kubectl create secret docker-registry's .dockerconfigjson) with the registry's credentials, for an oci:// archive.")
	fs.StringVar(&opts.toDirectory, "to-directory", "", "Directory decrypt writes to; it must not exist.")
	if len(args) == 0 || !slices.Contains([]string{"list", "inspect", "decrypt"}, args[0]) {
		fs.Usage()
		return "", "", opts, ErrUsage
	}
	verb := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return "", "", opts, ErrUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "archive %s: name one archive\n", verb) //nolint:errcheck // on stderr
		fs.Usage()
		return "", "", opts, ErrUsage
	}
	if verb == "decrypt" && opts.toDirectory == "" {
		fmt.Fprintln(stderr, "archive decrypt: --to-directory is required") //nolint:errcheck // on stderr
		return "", "", opts, ErrUsage
	}
	return verb, fs.Arg(0), opts, nil
}

// open reads the archive ref names, and returns it with the SHA-256 of its
// bytes (empty for a directory).
func open(ctx context.Context, ref string, opts options) (*archive.Archive, string, error) {
	if fi, err := os.Stat(ref); err == nil && fi.IsDir() {
		a, err := archive.ReadDirectory(ref)
		return a, "", err
	}
	ids, err := identities(opts.identity)
	if err != nil {
		return nil, "", err
	}
	rc, err := openBytes(ctx, ref, opts)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close() //nolint:errcheck // read only
	digest := newDigest(rc)
	a, err := archive.Read(digest, ids...)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", ref, err)
	}
	// The digest is of every byte, the padding after the archive's end too.
	if _, err := io.Copy(io.Discard, digest); err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", ref, err)
	}
	return a, digest.String(), nil
}

func openBytes(ctx context.Context, ref string, opts options) (io.ReadCloser, error) {
	location, ok := strings.CutPrefix(ref, "oci://")
	if !ok {
		f, err := os.Open(ref)
		if err != nil {
			return nil, fmt.Errorf("opening the archive: %w", err)
		}
		return f, nil
	}
	repo := repositoryOf(location)
	store := backupstore.OCI{Repository: repo}
	if opts.registryAuth != "" {
		data, err := os.ReadFile(opts.registryAuth)
		if err != nil {
			return nil, fmt.Errorf("reading --registry-auth: %w", err)
		}
		if store.Auth, err = backupstore.AuthFromDockerConfig(data, repo); err != nil {
			return nil, err
		}
	}
	return store.Open(ctx, location)
}

// repositoryOf is the repository of a registry reference: what comes
// before its digest (@sha256:...), or else before its tag (a ':' after
// the last '/', which a registry's port is not).
func repositoryOf(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		return ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

func identities(path string) ([]age.Identity, error) {
	if path == "" {
		return nil, nil
	}
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading --identity: %w", err)
	}
	return archive.ParseIdentities(data, "--identity "+path)
}

func list(w io.Writer, a *archive.Archive) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tKIND\tNAMESPACE\tNAME\tUID") //nolint:errcheck // flushed below
	for _, e := range a.Index.Objects {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Group, e.GroupVersionKind().GroupKind(), e.Namespace, e.Name, e.UID) //nolint:errcheck // flushed below
	}
	return tw.Flush()
}

func inspect(w io.Writer, ref, digest string, a *archive.Archive) error {
	ix := a.Index
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) } //nolint:errcheck // flushed below
	row("Archive", ref)
	if digest != "" {
		row("SHA-256", digest)
	}
	row("Format", orNone(ix.Format, "none (a directory clusterctl move --to-directory wrote)"))
	row("Encrypted", fmt.Sprint(a.Encrypted))
	if !ix.Taken.IsZero() {
		row("Taken", ix.Taken.Format("2006-01-02T15:04:05Z07:00"))
	}
	row("Source cluster", orNone(string(ix.Source), "unknown"))
	row("Namespaces", orNone(strings.Join(ix.Namespaces, ", "), "every namespace"))
	row("Cluster selector", orNone(ix.ClusterSelector, "every Cluster"))
	row("Paused by", orNone(ix.PausedBy, "not named: a restore resumes every paused Cluster and ClusterClass"))
	row("Objects", fmt.Sprintf("%d in %d creation groups", len(ix.Objects), ix.Groups))
	kinds := ix.Kinds()
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		row("  "+k, fmt.Sprint(kinds[k]))
	}
	return tw.Flush()
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
