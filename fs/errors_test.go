package fs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestToErrno(t *testing.T) {
	sentinels := []struct {
		err  error
		want syscall.Errno
	}{
		{ErrNotExist, syscall.ENOENT},
		{ErrExist, syscall.EEXIST},
		{ErrNotDir, syscall.ENOTDIR},
		{ErrIsDir, syscall.EISDIR},
		{ErrNotEmpty, syscall.ENOTEMPTY},
		{ErrReadOnly, syscall.EROFS},
		{ErrNotPermit, syscall.EPERM},
		{ErrTooLarge, syscall.EFBIG},
		{ErrInvalidName, syscall.EINVAL},
		{ErrNameTooLong, syscall.ENAMETOOLONG},
		{ErrNoSpace, syscall.ENOSPC},
		{ErrNotUTF8, syscall.EILSEQ},
		{ErrInvalidArg, syscall.EINVAL},
		{ErrNotSupp, syscall.ENOTSUP},
		{ErrUnfetched, syscall.EIO},
	}
	if len(sentinels) != len(errnoTable) {
		t.Fatalf("the test covers %d sentinels, errnoTable has %d: add the new ones here", len(sentinels), len(errnoTable))
	}

	type errnoCase struct {
		name string
		err  error
		want syscall.Errno
	}
	tests := []errnoCase{
		{"nil", nil, 0},
		{"raw errno", syscall.ENOSPC, syscall.ENOSPC},
		{"wrapped raw errno", fmt.Errorf("journal write: %w", syscall.EDQUOT), syscall.EDQUOT},
		{"joined errors", errors.Join(errors.New("compaction failed"), fmt.Errorf("append: %w", syscall.ENOSPC)), syscall.ENOSPC},
		{"unknown error", errors.New("disk on fire"), syscall.EIO},
		{"wrapped unknown error", fmt.Errorf("journal: %w", errors.New("torn record")), syscall.EIO},
	}
	for _, s := range sentinels {
		tests = append(tests,
			errnoCase{s.err.Error(), s.err, s.want},
			errnoCase{"wrapped " + s.err.Error(), fmt.Errorf("op /a/b.md: %w", s.err), s.want},
			errnoCase{"double-wrapped " + s.err.Error(), fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", s.err)), s.want},
		)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := toErrno(tc.err); got != tc.want {
				t.Errorf("toErrno(%v) = %v (%d), want %v (%d)", tc.err, got, int(got), tc.want, int(tc.want))
			}
		})
	}
}
