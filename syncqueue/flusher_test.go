package syncqueue

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/syncqueue/reconcile"
)

// TestDescribe: the store's typed errors read as answers, and the verdict
// reconcile gives each (docs/sync.md, R19–R27), as the flusher uses them.
func TestDescribe(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("update /a.md: %w", err) }
	cases := []struct {
		name string
		kind reconcile.UploadKind
		err  error
		want reconcile.Verdict
	}{
		{"R19 success", reconcile.UploadUpdate, nil, reconcile.VerdictSettle},
		{"R19 the journal could not record the answer", reconcile.UploadUpdate, &journalError{syscall.ENOSPC}, reconcile.VerdictUnrecorded},
		{"R20 precondition failed", reconcile.UploadUpdate, wrap(store.ErrPreconditionFailed), reconcile.VerdictResolve},
		{"R21 update not found", reconcile.UploadUpdate, wrap(store.ErrNotFound), reconcile.VerdictRecreate},
		{"R27 the create in place of a deleted memory not found", reconcile.UploadUpdate, &createdInstead{store.ErrNotFound}, reconcile.VerdictOutage},
		{"R23 path conflict", reconcile.UploadCreate, store.PathConflict("/a.md", "mem_1", "/a.md"), reconcile.VerdictRetryPath},
		{"R24 memory limit", reconcile.UploadCreate, wrap(store.ErrLimit), reconcile.VerdictWaitCap},
		{"R25 invalid", reconcile.UploadCreate, wrap(store.ErrInvalid), reconcile.VerdictRefused},
		{"R25 too large", reconcile.UploadUpdate, wrap(store.ErrTooLarge), reconcile.VerdictRefused},
		{"R26 unauthorized", reconcile.UploadUpdate, wrap(store.ErrUnauthorized), reconcile.VerdictCredential},
		{"R26 forbidden", reconcile.UploadDelete, &store.Error{Kind: store.ErrForbidden, Message: "read-only"}, reconcile.VerdictCredential},
		{"R27 unavailable", reconcile.UploadCreate, wrap(store.ErrUnavailable), reconcile.VerdictOutage},
		{"R27 rate limited", reconcile.UploadCreate, wrap(store.ErrRateLimited), reconcile.VerdictOutage},
		{"R27 internal", reconcile.UploadCreate, wrap(store.ErrInternal), reconcile.VerdictOutage},
		{"R27 a network error", reconcile.UploadUpdate, errors.New("dial tcp: connection refused"), reconcile.VerdictOutage},
		{"R27 cancelled", reconcile.UploadUpdate, wrap(context.Canceled), reconcile.VerdictCutShort},
		{"deletes not found", reconcile.UploadDelete, wrap(store.ErrNotFound), reconcile.VerdictSettle},
		{"R20 delete precondition failed", reconcile.UploadDelete, wrap(store.ErrPreconditionFailed), reconcile.VerdictResolve},
		{"R27 park not found", reconcile.UploadMove, wrap(store.ErrNotFound), reconcile.VerdictOutage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, by := reconcile.JudgeAnswer(describe(c.kind, c.err)); got != c.want {
				t.Fatalf("describe(%v) = %+v: %v by %s, want %v", c.err, describe(c.kind, c.err), got, by.ID, c.want)
			}
		})
	}
}
