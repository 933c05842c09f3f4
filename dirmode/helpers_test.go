package dirmode

import "golang.org/x/sys/unix"

func mkfifo(p string) error { return unix.Mkfifo(p, 0o644) }

// takeRestoreNow is what the loop would download again next.
func (d *Dir) takeRestoreNow() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.takeRestore()
}
