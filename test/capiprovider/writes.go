package capiprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Write is one write request a provider's controllers sent to their
// management cluster's API server.
type Write struct {
	// Time is when the request was sent.
	Time time.Time
	// Provider is the provider whose controllers wrote (e.g. "cluster-api").
	Provider string
	// Verb is create, update, patch, delete or deletecollection.
	Verb string
	// Kind is the kind written (its resource when the kind is not known),
	// Group its API group ("" for the core group).
	Kind, Group string
	// Namespace and Name name the object; Name is empty for a create with
	// generateName and for deletecollection.
	Namespace, Name string
	// Subresource is e.g. "status"; empty for the object itself.
	Subresource string
	// Code is the HTTP status of the answer, 0 if none came (the request
	// failed on the way, or was refused because the process was gone).
	Code int
	// Refused is set for a request a stopped process tried to send (see
	// Run.Killed): it never reached the API server.
	Refused bool
}

func (w Write) String() string {
	key := w.Name
	if w.Namespace != "" {
		key = w.Namespace + "/" + w.Name
	}
	sub := ""
	if w.Subresource != "" {
		sub = "/" + w.Subresource
	}
	return fmt.Sprintf("%s %s %s %s%s (%d)", w.Time.Format("15:04:05.000"), w.Provider, w.Verb, w.Kind, " "+key+sub, w.Code)
}

// Succeeded reports a write the API server accepted (2xx).
func (w Write) Succeeded() bool { return w.Code >= 200 && w.Code < 300 }

// writeLog is the record of every write the controllers of one management
// cluster sent, shared by its providers.
type writeLog struct {
	mapper meta.RESTMapper

	mu     sync.Mutex
	writes []Write
}

func (l *writeLog) add(w Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

func (l *writeLog) all() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes...)
}

// errProcessGone is what a controller of a stopped (killed) process gets
// for any request: nothing leaves a process that no longer runs.
var errProcessGone = fmt.Errorf("controller process is gone: %w", syscall.ECONNREFUSED)

// processTransport is a manager's way out to its API server: it records
// every write and, once the process is killed, refuses every request.
type processTransport struct {
	next     http.RoundTripper
	provider string
	log      *writeLog
	killed   *atomic.Bool
}

var writeVerbs = map[string]string{
	http.MethodPost:   "create",
	http.MethodPut:    "update",
	http.MethodPatch:  "patch",
	http.MethodDelete: "delete",
}

func (t *processTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, isWrite := writeVerbs[req.Method]
	var w Write
	if isWrite {
		w = t.describe(req, verb)
	}
	if t.killed.Load() {
		if isWrite {
			w.Refused = true
			t.log.add(w)
		}
		return nil, errProcessGone
	}
	resp, err := t.next.RoundTrip(req)
	if isWrite {
		if resp != nil {
			w.Code = resp.StatusCode
		}
		t.log.add(w)
	}
	return resp, err
}

// describe turns a write request into a Write.
func (t *processTransport) describe(req *http.Request, verb string) Write {
	w := Write{Time: time.Now(), Provider: t.provider, Verb: verb}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		w.Kind = req.URL.Path
		return w
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		w.Namespace, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 {
		w.Kind = req.URL.Path
		return w
	}
	resource := parts[0]
	if len(parts) >= 2 {
		w.Name = parts[1]
	}
	if len(parts) >= 3 {
		w.Subresource = parts[2]
	}
	if resource == "namespaces" && len(parts) >= 2 && w.Namespace == "" {
		// namespaces/<name> is the Namespace object itself.
		w.Name = parts[1]
	}
	if verb == "create" && w.Name == "" {
		w.Name = createdName(req)
	}
	if verb == "delete" && w.Name == "" {
		w.Verb = "deletecollection"
	}
	w.Group, w.Kind = gv.Group, resource
	if t.log.mapper != nil {
		if gvk, err := t.log.mapper.KindFor(gv.WithResource(resource)); err == nil {
			w.Kind = gvk.Kind
		}
	}
	return w
}

// createdName reads metadata.name from a create request's body, leaving the
// body readable for the transport.
func createdName(req *http.Request) string {
	if req.Body == nil {
		return ""
	}
	var body []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return ""
		}
		defer rc.Close()
		if body, err = io.ReadAll(rc); err != nil {
			return ""
		}
	} else {
		data, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(data))
		if err != nil {
			return ""
		}
		body = data
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return ""
	}
	return obj.Metadata.Name
}
