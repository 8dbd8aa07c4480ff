package main

import (
	"fmt"
	"math"
)

// carryCost is what spec.objectStatusPolicy Carry cost at one fleet size, from the
// repetitions in which the operator moved a fleet both ways: each figure is
// the median over those repetitions of the Carry move's against the
// Rebuild move's of the same repetition, so that both met the same
// clusters and the same machine load.
type carryCost struct {
	n int
	// pairs is how many repetitions had both moves.
	pairs int
	// whole and copying are the Carry move's durations over the Rebuild
	// move's: the whole move, and its Copying phase, where the status
	// writes are.
	whole, copying float64
	// requestsPerObject is the requests both API servers served beyond
	// the Rebuild move's (apiserver_request_total, background included),
	// per object moved.
	requestsPerObject float64
	// patchesPerObject is the PATCH requests the operator itself sent to
	// the target beyond the Rebuild move's (its rest_client_requests_total),
	// per object moved: the status writes, without the background.
	patchesPerObject float64
}

// ownTargetPatches is the PATCH requests the operator counted to the target.
func ownTargetPatches(r *result) float64 { return r.clientRequests["target"]["PATCH"] }

// carryCosts states, for every fleet size at which the operator moved with
// both spec.objectStatusPolicy policies, what Carry cost; none without -carry.
func (r *report) carryCosts() []carryCost {
	var out []carryCost
	for _, n := range r.sizes() {
		if c, ok := r.carryCostAt(n); ok {
			out = append(out, c)
		}
	}
	return out
}

func (r *report) carryCostAt(n int) (carryCost, bool) {
	pairs := r.pairs(n, toolOperatorCarry, toolOperator)
	if len(pairs) == 0 {
		return carryCost{}, false
	}
	extraPerObject := func(f func(*result) float64) float64 {
		var xs []float64
		for _, p := range pairs {
			if p.tool.objects > 0 {
				xs = append(xs, (f(p.tool)-f(p.other))/float64(p.tool.objects))
			}
		}
		return median(xs)
	}
	return carryCost{
		n:                 n,
		pairs:             len(pairs),
		whole:             r.ratioOf(n, toolOperatorCarry, toolOperator, wholeSeconds),
		copying:           r.ratioOf(n, toolOperatorCarry, toolOperator, copySeconds),
		requestsPerObject: extraPerObject(allRequests),
		patchesPerObject:  extraPerObject(ownTargetPatches),
	}, true
}

// title names the cost; text states it in one sentence.
func (c carryCost) title() string { return fmt.Sprintf("Carry's cost at N=%d", c.n) }

func (c carryCost) text() string {
	repetitions := "repetition"
	if c.pairs != 1 {
		repetitions += "s"
	}
	// The two extra counts come from different counters (the API servers'
	// count everyone, background included), so neither is a part of the
	// other: at N=10 the servers' extra can be the smaller.
	return fmt.Sprintf("the whole move takes %s the Rebuild move's (Copying %s); %s requests per moved object on both "+
		"API servers (background included), %s PATCHes per moved object from the operator to the target by its own count "+
		"(the status writes); medians over %d %s, each Carry move against the Rebuild move of its repetition.",
		times(c.whole), times(c.copying), signed(c.requestsPerObject), signed(c.patchesPerObject), c.pairs, repetitions)
}

// signed is an extra amount, with its sign: "+0.93".
func signed(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%+.2f", x)
}
