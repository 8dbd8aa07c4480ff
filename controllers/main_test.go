//go:build cluster

package controllers_test

import (
	"testing"

	"github.com/move-operator/move-operator/test/movetest"
	"github.com/move-operator/move-operator/test/testenv"
)

func TestMain(m *testing.M) {
	movetest.Main(m, testenv.Options{CAPI: true})
}
