package main

import (
	"fmt"
	"strconv"

	"github.com/move-operator/move-operator/test/installed"
)

// goMemLimitEnvName is the variable the Go runtime reads its soft memory
// limit from.
const goMemLimitEnvName = "GOMEMLIMIT"

// goMemLimit is how the operator's GOMEMLIMIT is set for a run.
type goMemLimit struct {
	// env is added to the env the Deployment gives the manager (a later
	// entry wins): empty when the bench keeps the Deployment's.
	env []string
	// describe says what the operator ran with, for the report.
	describe string
}

// operatorGoMemLimit resolves -operator-gomemlimit against the installer:
// "deployment" keeps the env its Deployment gives the manager (test/installed
// resolves it from the container's memory limit, as the kubelet does), so
// the limit is stated once, in dist/install.yaml; "off" or "" runs without
// one; anything else is passed as Go reads it.
func (o options) operatorGoMemLimit(in *installed.Install) (goMemLimit, error) {
	switch o.goMemLimit {
	case "deployment":
		value, err := in.EnvValue(goMemLimitEnvName)
		if err != nil {
			return goMemLimit{}, fmt.Errorf("reading the manager's env from %s: %w", installed.InstallPath, err)
		}
		if value != "" {
			return goMemLimit{describe: bytesWords(value) + " (the Deployment's)"}, nil
		}
		// The Deployment sets none; say so rather than let the bench's own
		// environment decide.
		return goMemLimit{env: []string{goMemLimitEnvName + "=off"}, describe: "off (the Deployment sets none)"}, nil
	case "", "off":
		return goMemLimit{env: []string{goMemLimitEnvName + "=off"}, describe: "off"}, nil
	}
	return goMemLimit{env: []string{goMemLimitEnvName + "=" + o.goMemLimit}, describe: o.goMemLimit}, nil
}

// bytesWords adds MiB to a count of bytes, as the kubelet resolves a
// memory limit into GOMEMLIMIT: "268435456 (256 MiB)".
func bytesWords(value string) string {
	n, err := strconv.ParseUint(value, 10, 64)
	if err != nil {
		return value
	}
	return fmt.Sprintf("%s (%g MiB)", value, float64(n)/(1<<20))
}
