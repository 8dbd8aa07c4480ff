package graph

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	movev1alpha1 "github.com/move-operator/move-operator/api/v1alpha1"
)

// maxStatusWarnings is how many warnings MovePlan.Warnings can hold (its
// MaxItems validation).
const maxStatusWarnings = 100

// Summary returns the plan as the MoveOperation status reports it. When there
// are more warnings than the status can hold, the last one says how many
// were left out.
func (p *Plan) Summary() *movev1alpha1.MovePlan {
	s := &movev1alpha1.MovePlan{
		Objects: clampInt32(p.Len()),
		Groups:  clampInt32(len(p.Groups)),
	}
	for _, k := range p.Kinds() {
		s.Kinds = append(s.Kinds, movev1alpha1.KindCount{Kind: k.Kind, Count: clampInt32(k.Count)})
	}
	warnings := p.Warnings
	if len(warnings) > maxStatusWarnings {
		warnings = append(slices.Clone(warnings[:maxStatusWarnings-1]),
			fmt.Sprintf("and %d more warnings", len(p.Warnings)-(maxStatusWarnings-1)))
	}
	// Warnings are kept whole: each ends with what to do, and there are at
	// most maxStatusWarnings of them (the status test at 1,000 clusters
	// holds them all under 64 KiB).
	s.Warnings = slices.Clone(warnings)
	s.Excluded = p.exclusionCounts()
	return s
}

// maxExcludedListed is how many objects of each exclusion reason the status
// names; maxStatusEntry bounds each entry (names may be 253 characters
// long, and a message names two objects), so the status stays small however
// many objects stay behind.
const (
	maxExcludedListed = 10
	maxStatusEntry    = 300
)

// clip shortens a status entry to maxStatusEntry bytes, on a character
// boundary, marking the cut with "...".
func clip(s string) string {
	if len(s) <= maxStatusEntry {
		return s
	}
	cut := maxStatusEntry - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// exclusionCounts counts the excluded objects per reason, in a fixed order
// (what stops the move first), naming the first of each.
func (p *Plan) exclusionCounts() []movev1alpha1.ExclusionCount {
	order := []ExclusionReason{ExcludedOwnerMissing, ExcludedOwnerNotMoved, ExcludedNotSelected, ExcludedNotInHierarchy}
	byReason := map[ExclusionReason]*movev1alpha1.ExclusionCount{}
	for _, e := range p.Excluded {
		c, ok := byReason[e.Reason]
		if !ok {
			c = &movev1alpha1.ExclusionCount{Reason: string(e.Reason)}
			byReason[e.Reason] = c
			if !slices.Contains(order, e.Reason) {
				order = append(order, e.Reason)
			}
		}
		c.Count++
		if len(c.Objects) < maxExcludedListed {
			c.Objects = append(c.Objects, clip(fmt.Sprintf("%s: %s", e.ObjectRef, e.Message)))
		}
	}
	var out []movev1alpha1.ExclusionCount
	for _, r := range order {
		if c, ok := byReason[r]; ok {
			out = append(out, *c)
		}
	}
	return out
}

func clampInt32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// Print writes the plan for a human, as a dry run shows it: counts per kind,
// every group with its objects, what stays in the source, what does not
// move, and the warnings. Objects that do not move only because nothing
// moves them (most Secrets and ConfigMaps) are counted, not listed.
func (p *Plan) Print(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Move plan: %d objects in %d groups\n", p.Len(), len(p.Groups))

	b.WriteString("\nObjects per kind:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, k := range p.Kinds() {
		fmt.Fprintf(tw, "  %s\t%d\n", k.Kind, k.Count)
	}
	_ = tw.Flush()

	for i, group := range p.Groups {
		fmt.Fprintf(&b, "\nGroup %d (%d objects):\n", i+1, len(group))
		for _, o := range group {
			marker := ""
			if !o.Delete {
				marker = "  [copied, not deleted]"
			}
			fmt.Fprintf(&b, "  %s%s\n", o.ObjectRef, marker)
		}
	}

	unowned := 0
	var listed []Exclusion
	for _, e := range p.Excluded {
		if e.Reason == ExcludedNotInHierarchy {
			unowned++
			continue
		}
		listed = append(listed, e)
	}
	if len(listed) > 0 || unowned > 0 {
		b.WriteString("\nNot moved:\n")
		for _, e := range listed {
			marker := ""
			if e.Blocking {
				marker = " [blocks the move]"
			}
			fmt.Fprintf(&b, "  %s: %s%s\n", e.ObjectRef, e.Message, marker)
		}
		if unowned > 0 {
			fmt.Fprintf(&b, "  %d objects that nothing moving owns (Secrets, ConfigMaps and such)\n", unowned)
		}
	}
	if len(p.Warnings) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, w := range p.Warnings {
			fmt.Fprintf(&b, "  - %s\n", w)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String returns the plan as Print writes it.
func (p *Plan) String() string {
	var b strings.Builder
	_ = p.Print(&b)
	return b.String()
}

// JoinFirstTen names items for a message: the first ten, then how many
// more there are.
func JoinFirstTen[T fmt.Stringer](items []T, sep string) string {
	names := make([]string, 0, min(len(items), 11))
	for i, item := range items {
		if i == 10 {
			names = append(names, fmt.Sprintf("and %d more", len(items)-10))
			break
		}
		names = append(names, item.String())
	}
	return strings.Join(names, sep)
}
