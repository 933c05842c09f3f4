package deploy

import (
	"testing"

	"github.com/memfs/memfs/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
