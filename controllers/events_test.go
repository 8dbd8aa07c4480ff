package controllers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEventNotesFitWhatTheAPIServerAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		note string
	}{
		{"a short note is kept whole", "phase Failed: NotProvisioned"},
		{"a note of exactly the limit is kept whole", strings.Repeat("a", maxEventNote)},
		{"a 1,492-byte failure message is cut", "phase RollingBack: " + strings.Repeat("Cluster ns/c is not provisioned; ", 45)},
		{"a cut never splits a character", strings.Repeat("é", maxEventNote)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := eventNote(tc.note)
			if len(got) > maxEventNote {
				t.Fatalf("note of %d bytes, the API server refuses more than %d", len(got), maxEventNote)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("note is not valid UTF-8: %q", got[len(got)-80:])
			}
			if len(tc.note) <= maxEventNote && got != tc.note {
				t.Fatalf("a note that fits was changed: %q", got)
			}
			if len(tc.note) > maxEventNote && !strings.Contains(got, "status") {
				t.Fatalf("a cut note must say where the whole message is: %q", got)
			}
		})
	}
}
