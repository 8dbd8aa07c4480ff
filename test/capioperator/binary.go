package capioperator

import (
	"context"

	"github.com/move-operator/move-operator/test/gomodule"
)

// Binary returns the path of the cluster-api-operator manager binary of the
// version go.mod pins: the released binary, built by go install the first
// time on a machine (about 1.5 minutes cold on 2 cores) and cached. Not one
// built in this module: its main package imports its own internal packages,
// which no other module may import.
func Binary(ctx context.Context) (string, error) {
	_, version, err := ModuleDir(ctx)
	if err != nil {
		return "", err
	}
	return gomodule.Install(ctx, modulePath+"/cmd", version, "cluster-api-operator")
}
