package cli

import (
	"os"
	"testing"

	"github.com/withruntime/withruntime/internal/cli/localtrusttest"
)

func TestMain(m *testing.M) {
	localtrusttest.Main() // serves instead when started as another user's listener
	os.Exit(m.Run())
}
