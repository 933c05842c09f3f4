package history

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/memfs/memfs/store"
)

// What a revert undoes: one session's changes, or every change after a
// time.
type Scope struct {
	// SessionID: the changes made with that session's token.
	SessionID string
	// Since: the changes made after it (when SessionID is "").
	Since time.Time
}

func (s Scope) String() string {
	if s.SessionID != "" {
		return "session " + s.SessionID
	}
	return "the changes after " + s.Since.Format(time.RFC3339Nano)
}

// in says whether v is one of the changes the scope undoes.
func (s Scope) in(v store.Version) bool {
	if s.SessionID != "" {
		return v.CreatedBy != nil && v.CreatedBy.Type == store.ActorSession && v.CreatedBy.SessionID == s.SessionID
	}
	return v.CreatedAt.After(s.Since)
}

// Actions of a revert step.
const (
	ActDelete   = "delete"   // created in scope: removed
	ActRecreate = "recreate" // deleted in scope: made again (a new memory id) at its path then
	ActRestore  = "restore"  // changed or moved in scope: put back as it was
	ActNone     = "none"     // already as it was
)

// Step is what a revert does to one memory the scope touched.
type Step struct {
	MemoryID string `json:"memory_id"`
	Action   string `json:"action"`
	// Path is where the memory is now ("" if deleted), To where it goes
	// back to ("" when it goes).
	Path string `json:"path"`
	To   string `json:"to"`
	// Back is the version it goes back to (nil for a delete).
	Back *store.Version `json:"back_to,omitempty"`
	// Head is its newest version: the precondition of the write.
	Head store.Version `json:"head"`
	// Skip says why the step is not done ("" when it is): a change made
	// since by someone else (done anyway with force), the version to go
	// back to redacted, its path taken.
	Skip string `json:"skip,omitempty"`
	// Forced: a change by someone else since is overwritten (--force).
	Forced bool `json:"forced,omitempty"`
	// Result is what happened when it was applied: "done", or the error.
	Result string `json:"result,omitempty"`
	// NewMemoryID is the id a recreate made.
	NewMemoryID string `json:"new_memory_id,omitempty"`
}

// Plan is a revert worked out, before it is applied.
type Plan struct {
	Scope Scope
	Steps []Step
}

// Live is a memory in the store now, by its path.
type Live struct {
	ID     string
	SHA256 string
}

// planRevert works out a revert from each touched memory's versions
// (newest first, as listed), and the memories in the store now by path. A memory changed in scope goes back to its version just
// before the scope's first change to it; for a session, a memory someone
// else changed after that first change is left alone and reported
// (unless force), since undoing the session would undo their change too.
func planRevert(scope Scope, histories map[string][]store.Version, live map[string]Live, force bool) Plan {
	plan := Plan{Scope: scope}
	ids := make([]string, 0, len(histories))
	for id := range histories {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if st, ok := planOne(scope, histories[id], force); ok {
			plan.Steps = append(plan.Steps, st)
		}
	}
	checkPaths(plan.Steps, live)
	sort.SliceStable(plan.Steps, func(i, j int) bool { return stepKey(plan.Steps[i]) < stepKey(plan.Steps[j]) })
	return plan
}

func stepKey(s Step) string {
	if s.Path != "" {
		return s.Path
	}
	return s.To
}

// planOne is the step for one memory, from its versions newest first; ok
// is false when the scope did not touch it.
func planOne(scope Scope, vs []store.Version, force bool) (Step, bool) {
	first := -1 // the oldest version in scope
	for i, v := range vs {
		if scope.in(v) {
			first = i
		}
	}
	if first < 0 {
		return Step{}, false
	}
	head := vs[0]
	st := Step{MemoryID: head.MemoryID, Head: head}
	if head.Operation != store.OpDeleted && head.Path != nil {
		st.Path = *head.Path
	}
	if scope.SessionID != "" {
		for _, v := range vs[:first] {
			if !scope.in(v) {
				st.Skip = fmt.Sprintf("changed since by %s at %s", v.CreatedBy.String(), v.CreatedAt.UTC().Format(time.RFC3339))
				break
			}
		}
		if st.Skip != "" && force {
			st.Skip, st.Forced = "", true
		}
	}
	if first == len(vs)-1 { // the scope created it
		st.Action = ActDelete
		if head.Operation == store.OpDeleted {
			st.Action = ActNone
		}
		return st, true
	}
	back := vs[first+1]
	st.Back = &back
	switch {
	case back.RedactedAt != nil || back.Path == nil || back.ContentSHA256 == nil:
		st.Action, st.Skip = ActRestore, "the version to go back to ("+back.ID+") is redacted"
		return st, true
	case head.Operation == store.OpDeleted:
		st.Action = ActRecreate
	case head.Path != nil && *head.Path == *back.Path && head.ContentSHA256 != nil && *head.ContentSHA256 == *back.ContentSHA256:
		st.Action = ActNone
	default:
		st.Action = ActRestore
	}
	st.To = *back.Path
	return st, true
}

// checkPaths marks the steps whose path to go back to is taken by a
// memory this revert leaves there (nor moves nor deletes), or by another
// step. A memory made again that is there already with the content it
// goes back to (an earlier revert made it) needs nothing more.
// REQUIRES: the steps' Skip set from their own versions.
func checkPaths(steps []Step, live map[string]Live) {
	leaving := map[string]bool{} // memory ids that leave their path
	for _, s := range steps {
		if s.Skip == "" && s.Path != "" && (s.Action == ActDelete || (s.Action == ActRestore && s.To != s.Path)) {
			leaving[s.MemoryID] = true
		}
	}
	claimed := map[string]string{}
	for i := range steps {
		s := &steps[i]
		if s.Skip != "" || s.To == "" || s.To == s.Path || s.Action == ActNone || s.Action == ActDelete {
			continue
		}
		if other, ok := live[s.To]; ok && other.ID != s.MemoryID && !leaving[other.ID] {
			if s.Action == ActRecreate && s.Back.ContentSHA256 != nil && other.SHA256 == *s.Back.ContentSHA256 {
				s.Action, s.NewMemoryID = ActNone, other.ID // made again already
				continue
			}
			s.Skip = fmt.Sprintf("its path then, %s, is taken by %s", s.To, other.ID)
			continue
		}
		if other, ok := claimed[s.To]; ok {
			s.Skip = fmt.Sprintf("%s also goes back to %s", other, s.To)
			continue
		}
		claimed[s.To] = s.MemoryID
	}
}

// Writer is what applying a revert writes with; store/client's Client
// satisfies it.
type Writer interface {
	Source
	CreateMemory(ctx context.Context, storeID, path, content string) (*store.Memory, error)
	UpdateMemory(ctx context.Context, storeID, memoryID string, in store.UpdateMemoryInput) (*store.Memory, error)
	DeleteMemory(ctx context.Context, storeID, memoryID string, expectedSHA256 *string) error
}

// PlanRevert reads what the scope changed in storeID and works out the
// revert (nothing is written).
func PlanRevert(ctx context.Context, w Writer, storeID string, scope Scope, force bool) (Plan, error) {
	var touched []store.Version
	var err error
	if scope.SessionID != "" {
		touched, err = listAll(ctx, w, storeID, store.ListVersionsOptions{SessionID: scope.SessionID})
	} else {
		touched, _, err = versionsAfter(ctx, w, storeID, scope.Since, 0)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("list the versions of %s: %w", scope, err)
	}
	var ids []string
	seen := map[string]bool{}
	for _, v := range touched {
		if !seen[v.MemoryID] {
			seen[v.MemoryID] = true
			ids = append(ids, v.MemoryID)
		}
	}
	histories := make(map[string][]store.Version, len(ids))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, id := range ids {
		g.Go(func() error {
			h, err := Log(gctx, w, storeID, id)
			if err != nil {
				return fmt.Errorf("list the versions of memory %s: %w", id, err)
			}
			mu.Lock()
			defer mu.Unlock()
			histories[id] = h
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Plan{}, err
	}
	live, err := livePaths(ctx, w, storeID)
	if err != nil {
		return Plan{}, err
	}
	return planRevert(scope, histories, live, force), nil
}

// livePaths is every memory in the store now, by path.
func livePaths(ctx context.Context, w Writer, storeID string) (map[string]Live, error) {
	now, err := listNow(ctx, w, storeID)
	if err != nil {
		return nil, fmt.Errorf("list the memories of %s: %w", storeID, err)
	}
	live := make(map[string]Live, len(now))
	for _, m := range now {
		live[m.Path] = Live{ID: m.ID, SHA256: m.ContentSHA256}
	}
	return live, nil
}

// Apply makes the plan's steps that are not skipped, each with its head's
// sha as precondition (a memory changed since the plan is refused, not
// overwritten): the deletes first, then the restores, then the
// recreates, so that a path a delete or a move frees can be gone back
// to. Each step's Result says what happened; the error counts the steps
// that failed.
func Apply(ctx context.Context, w Writer, storeID string, plan *Plan) error {
	order := []string{ActDelete, ActRestore, ActRecreate}
	failed := 0
	for _, act := range order {
		for i := range plan.Steps {
			s := &plan.Steps[i]
			if s.Action != act || s.Skip != "" {
				continue
			}
			if err := applyStep(ctx, w, storeID, s); err != nil {
				s.Result = err.Error()
				failed++
				continue
			}
			s.Result = "done"
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of the revert's steps failed (see their result)", failed)
	}
	return nil
}

func applyStep(ctx context.Context, w Writer, storeID string, s *Step) error {
	switch s.Action {
	case ActDelete:
		return w.DeleteMemory(ctx, storeID, s.MemoryID, s.Head.ContentSHA256)
	case ActRestore, ActRecreate:
		back, err := w.GetVersion(ctx, storeID, s.Back.ID)
		if err != nil {
			return err
		}
		if back.Content == nil || back.Path == nil {
			return errors.New("the version to go back to has no content any more (redacted)")
		}
		if s.Action == ActRecreate {
			m, err := w.CreateMemory(ctx, storeID, *back.Path, *back.Content)
			if err != nil {
				return err
			}
			s.NewMemoryID = m.ID
			return nil
		}
		in := store.UpdateMemoryInput{Content: back.Content, ExpectedSHA256: s.Head.ContentSHA256}
		if s.To != s.Path {
			in.Path = back.Path
		}
		_, err = w.UpdateMemory(ctx, storeID, s.MemoryID, in)
		return err
	}
	return nil
}
