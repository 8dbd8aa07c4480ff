package v1alpha1_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// troubleshootingPage is the page users are sent to when a MoveOperation
// stops: its table must explain every reason the API can report.
const troubleshootingPage = "../../docs/troubleshooting.md"

// reasonCell is the first column of a row of the troubleshooting table: the
// reason in backticks, optionally followed by what carries it ("(Warning
// event)").
var reasonCell = regexp.MustCompile("^`([A-Za-z0-9]+)`")

// TestEveryReasonIsExplainedInTheTroubleshootingPage reads the reasons from
// the source rather than from a list kept here, so a reason added to
// conditions.go without a row in docs/troubleshooting.md fails this test.
func TestEveryReasonIsExplainedInTheTroubleshootingPage(t *testing.T) {
	reasons := reasonsDefinedIn(t, "conditions.go")
	if len(reasons) == 0 {
		t.Fatal("found no exported Reason* string constant in conditions.go: has the file moved?")
	}
	documented := reasonsInTable(t, troubleshootingPage)

	var missing []string
	for name, value := range reasons {
		if !documented[value] {
			missing = append(missing, name+" ("+strconv.Quote(value)+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d of the %d reasons in api/v1alpha1/conditions.go have no row in docs/troubleshooting.md's table "+
			"(a row whose first column starts with the reason in backticks, e.g. | `%s` | meaning | what to do |):\n  %s",
			len(missing), len(reasons), firstValue(reasons, missing), strings.Join(missing, "\n  "))
	}
}

// reasonsDefinedIn returns the exported string constants named Reason* in
// the Go file, by constant name, with their values.
func reasonsDefinedIn(t *testing.T, path string) map[string]string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	reasons := map[string]string{}
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !name.IsExported() || !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s in %s is not a string literal: the test cannot tell its value", name.Name, path)
					continue
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("unquoting %s in %s: %v", name.Name, path, err)
				}
				reasons[name.Name] = value
			}
		}
	}
	return reasons
}

// reasonsInTable returns the reasons named in the first column of the
// Markdown tables of the page.
func reasonsInTable(t *testing.T, path string) map[string]bool {
	t.Helper()
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the troubleshooting page: %v", err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(content), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		if m := reasonCell.FindStringSubmatch(strings.TrimSpace(cells[1])); m != nil {
			documented[m[1]] = true
		}
	}
	return documented
}

func firstValue(reasons map[string]string, missing []string) string {
	name, _, _ := strings.Cut(missing[0], " ")
	return reasons[name]
}
