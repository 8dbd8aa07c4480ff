// Package argocd holds the Argo CD health check for MoveOperation
// (health.lua); this test runs the script as Argo CD would, with gopher-lua,
// on MoveOperations captured from the controller tests.
package argocd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// health runs health.lua on obj (a MoveOperation as JSON) and returns the
// status and message it reports.
func health(t *testing.T, obj []byte) (string, string) {
	t.Helper()
	script, err := os.ReadFile("health.lua")
	if err != nil {
		t.Fatal(err)
	}
	var decoded any
	if err := json.Unmarshal(obj, &decoded); err != nil {
		t.Fatalf("decoding the MoveOperation: %v", err)
	}
	state := lua.NewState()
	defer state.Close()
	state.SetGlobal("obj", toLua(state, decoded))
	fn, err := state.LoadString(string(script))
	if err != nil {
		t.Fatalf("loading health.lua: %v", err)
	}
	if err := state.CallByParam(lua.P{Fn: fn, NRet: 1, Protect: true}); err != nil {
		t.Fatalf("running health.lua: %v", err)
	}
	hs, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("health.lua returned %s, want a table", state.Get(-1).Type())
	}
	return lua.LVAsString(hs.RawGetString("status")), lua.LVAsString(hs.RawGetString("message"))
}

// toLua converts decoded JSON to Lua values the way Argo CD does: objects
// and arrays become tables (arrays 1-based), numbers become numbers.
func toLua(state *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := state.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(state, e))
		}
		return t
	case []any:
		t := state.NewTable()
		for _, e := range v {
			t.Append(toLua(state, e))
		}
		return t
	case string:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}

// wantFor is the health Argo CD must show for a MoveOperation in phase.
func wantFor(phase string) string {
	switch phase {
	case "Done":
		return "Healthy"
	case "Failed":
		return "Degraded"
	default:
		return "Progressing"
	}
}

func TestTheHealthOfMoveOperationsCapturedFromTheControllerTests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata: capture them with MOVE_OPERATOR_CAPTURE_STATUS (see README.md)")
	}
	sort.Strings(files)
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var mo struct {
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		}
		if err := json.Unmarshal(data, &mo); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want := wantFor(mo.Status.Phase)
		seen[want] = true
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json")+" is "+want, func(t *testing.T) {
			got, msg := health(t, data)
			if got != want {
				t.Errorf("health of a MoveOperation in phase %s: got %s (%q), want %s", mo.Status.Phase, got, msg, want)
			}
			if msg == "" {
				t.Errorf("health of a MoveOperation in phase %s has no message", mo.Status.Phase)
			}
		})
	}
	for _, want := range []string{"Progressing", "Healthy", "Degraded"} {
		if !seen[want] {
			t.Errorf("no fixture shows %s: capture a full move and a rolled back one", want)
		}
	}
}

func TestTheHealthOfMoveOperationsNotYetOrStillWaiting(t *testing.T) {
	for _, tc := range []struct {
		name, obj, want, inMessage string
	}{{
		name: "a MoveOperation the operator has not seen yet is progressing",
		obj:  `{"metadata":{"name":"m","generation":1}}`,
		want: "Progressing", inMessage: "Waiting for move-operator",
	}, {
		name: "a move stalled in Validating for want of its Secret is degraded and says why",
		obj: `{"metadata":{"name":"m","generation":1},"status":{"phase":"Validating","observedGeneration":1,"conditions":[
			{"type":"Ready","status":"False","reason":"TargetSecretNotFound","message":"Secret ops/target not found"},
			{"type":"Stalled","status":"True","reason":"TargetSecretNotFound","message":"Secret ops/target not found"}]}}`,
		want: "Degraded", inMessage: "TargetSecretNotFound",
	}, {
		name: "a move copying shows its progress",
		obj: `{"metadata":{"name":"m","generation":1},"status":{"phase":"Copying","observedGeneration":1,"progress":{"summary":"12/40"},"conditions":[
			{"type":"Ready","status":"False","reason":"Progressing","message":"phase Copying"},
			{"type":"Reconciling","status":"True","reason":"Progressing","message":"phase Copying"}]}}`,
		want: "Progressing", inMessage: "12/40",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := health(t, []byte(tc.obj))
			if got != tc.want || !strings.Contains(msg, tc.inMessage) {
				t.Errorf("got %s (%q), want %s with a message containing %q", got, msg, tc.want, tc.inMessage)
			}
		})
	}
}
