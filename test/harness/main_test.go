package harness

import "testing"

// The harness's own tests start memfs serve processes too: Main removes
// the binary they built, as it does for every package that uses it.
func TestMain(m *testing.M) { Main(m) }
