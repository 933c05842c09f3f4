package fs

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sirupsen/logrus"
)

// ProbeMount reports why this process can't mount a FUSE filesystem, nil
// when it can: CheckFUSE, then a real mount of an empty read-only tree in
// a temporary directory, unmounted at once. A device that opens but does
// not mount (a container without CAP_SYS_ADMIN, /dev/null bound over
// /dev/fuse, a seccomp profile refusing mount) fails only there.
func ProbeMount() error {
	if err := CheckFUSE(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "memfs-probe-")
	if err != nil {
		return fmt.Errorf("a directory to try a mount in: %w", err)
	}
	defer os.Remove(dir)
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	t, err := NewTree(Options{StoreID: "memfs-probe", ReadOnly: true, Log: quiet})
	if err != nil {
		return err
	}
	m, err := MountTree(dir, t, MountOptions{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return m.Unmount(ctx)
}
