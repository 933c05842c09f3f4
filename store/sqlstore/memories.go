package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/memfs/memfs/store"
)

const memoryColumns = `id, store_id, version_id, path, content, sha, size, created_at, updated_at`

func scanMemory(r rowScanner, full bool) (*store.Memory, error) {
	var m store.Memory
	var content string
	var created, updated int64
	if err := r.Scan(&m.ID, &m.MemoryStoreID, &m.MemoryVersionID, &m.Path, &content, &m.ContentSHA256, &m.ContentSizeBytes, &created, &updated); err != nil {
		return nil, err
	}
	m.Type = store.TypeMemory
	m.CreatedAt, m.UpdatedAt = micros(created), micros(updated)
	if full {
		m.Content = &content
	}
	return &m, nil
}

func notFoundMemory(id string) error {
	return store.Errorf(store.ErrNotFound, "memory %s not found", id)
}

// subtreeEnd is the first path after every path below dir ("/a" -> "/a0"):
// '0' is the byte after '/', so [dir+"/", subtreeEnd(dir)) is the subtree.
func subtreeEnd(dir string) string { return dir + "0" }

// checkPathFree enforces uniqueness and file/directory exclusivity for a
// memory (other than selfID) about to take path p.
func (db *DB) checkPathFree(ctx context.Context, tx *sql.Tx, storeID, p, selfID string) error {
	var id, other string
	// p itself, or a memory below p (p would be a directory).
	err := tx.QueryRowContext(ctx, db.d.q(qPathTaken), pathTakenArgs(storeID, p, selfID)...).Scan(&id, &other)
	if err == nil {
		return store.PathConflict(p, id, other)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return mapErr(err)
	}
	// A memory at an ancestor of p (p would be below a file).
	anc := ancestors(p)
	if len(anc) == 0 {
		return nil
	}
	args := []any{storeID, selfID}
	for _, a := range anc {
		args = append(args, a)
	}
	err = tx.QueryRowContext(ctx, db.d.q(qPathAncestor(len(anc))), args...).Scan(&id, &other)
	if err == nil {
		return store.PathConflict(p, id, other)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return mapErr(err)
	}
	return nil
}

// ancestors returns the proper ancestors of path p, nearest first
// ("/a/b/c" gives "/a/b", "/a"; "/a" gives none).
func ancestors(p string) []string {
	var out []string
	for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
		out = append(out, p[:i])
	}
	return out
}

// actorColumns returns what the actor_type and actor_id columns hold.
func actorColumns(a store.Actor) (typ, id string) {
	if a.Type == store.ActorSession {
		return a.Type, a.SessionID
	}
	return a.Type, a.APIKeyID
}

// newMemory is the memory a create just wrote, as GetMemory would read it
// back (timestamps are whole microseconds, as stored).
func newMemory(id, storeID, versionID, path, content string, now int64) *store.Memory {
	return &store.Memory{
		ID: id, Type: store.TypeMemory, MemoryStoreID: storeID, MemoryVersionID: versionID, Path: path,
		Content: &content, ContentSHA256: store.SHA256Hex(content), ContentSizeBytes: int64(len(content)),
		CreatedAt: micros(now), UpdatedAt: micros(now),
	}
}

func limitErr(storeID string) error {
	return &store.Error{Kind: store.ErrLimit, Code: "memory_limit_reached",
		Message: "memory store " + storeID + " is at its limit of memories; delete some to create more"}
}

// change is what one mutation appends: a version row and a feed row.
type change struct {
	op, memoryID, path, prevPath string
	content                      *string
	actor                        store.Actor
}

// record appends the version and change-feed rows of one mutation and
// returns the new version id. It advances st.lastSeq; writeTx stores it.
func (db *DB) record(ctx context.Context, tx *sql.Tx, storeID string, st *lockedStore, c change, now int64) (string, error) {
	vid := store.NewID(store.PrefixVersion)
	return vid, db.recordAs(ctx, tx, storeID, st, vid, c, now)
}

// recordAs is record with the version id chosen by the caller.
func (db *DB) recordAs(ctx context.Context, tx *sql.Tx, storeID string, st *lockedStore, vid string, c change, now int64) error {
	var sha, size any
	if c.content != nil {
		sha, size = store.SHA256Hex(*c.content), int64(len(*c.content))
	}
	var content any
	if c.content != nil {
		content = db.d.text(*c.content)
	}
	actorType, actorID := actorColumns(c.actor)
	if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO memory_versions (id, store_id, memory_id, operation, path, content, sha, size, created_at, actor_type, actor_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		vid, storeID, c.memoryID, c.op, c.path, content, sha, size, now, actorType, actorID); err != nil {
		return mapErr(err)
	}
	st.lastSeq++
	var prev any
	if c.prevPath != "" {
		prev = c.prevPath
	}
	if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO memory_changes (store_id, seq, operation, memory_id, path, previous_path, sha, size, version_id, actor_type, actor_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		storeID, st.lastSeq, c.op, c.memoryID, c.path, prev, sha, size, vid, actorType, actorID, now); err != nil {
		return mapErr(err)
	}
	return nil
}

func archivedErr(storeID string) error {
	return store.Errorf(store.ErrForbidden, "memory store %s is archived; its memories can't be changed", storeID)
}

// CreateMemory creates a memory at a free path. Concurrent creates into
// one store run in groups, one transaction each (group.go; doc.go,
// "Grouped writes").
func (db *DB) CreateMemory(ctx context.Context, storeID string, in store.CreateMemoryInput) (*store.Memory, error) {
	// The server checks this too; checked here, a path PostgreSQL would
	// refuse as text (NUL, bad UTF-8) can't fail the other creates of its
	// group.
	if err := store.ValidatePath(in.Path); err != nil {
		return nil, err
	}
	a := &createArg{storeID: storeID, id: store.NewID(store.PrefixMemory), vid: store.NewID(store.PrefixVersion), in: in, now: db.now()}
	return db.creates.do(ctx, storeID, a)
}

// groupWrite is one write of a group that runWritesTx runs in one
// transaction: a create (SQLite only; PostgreSQL has runCreates), an
// update or a delete.
type groupWrite interface {
	// apply checks the write against the store as tx shows it (so after
	// the writes before it in its group) and, unless it is refused,
	// writes it. A refusal (not found, archived, precondition, path
	// conflict, cap) writes nothing and fails only this write; err is a
	// database error, after which tx must be rolled back.
	apply(ctx context.Context, db *DB, tx *sql.Tx, st *lockedStore) (refused, err error)
	// result is the write's answer once its group has committed.
	result() *store.Memory
}

// runWritesTx runs a group of writes to one store in one write
// transaction: one store lock, one commit, one NOTIFY. Each write is
// checked against the store as the ones before it left it, and a refused
// write writes nothing, so the group is its writes one after another with
// one commit. An error of the database fails the whole group.
func (db *DB) runWritesTx(ctx context.Context, storeID string, reqs []*groupReq[*store.Memory]) {
	refused := make([]error, len(reqs))
	err := db.writeTx(ctx, storeID, func(tx *sql.Tx, st *lockedStore) error {
		for i, r := range reqs {
			var err error
			refused[i], err = r.arg.(groupWrite).apply(ctx, db, tx, st)
			if err != nil {
				return err
			}
		}
		return nil
	})
	for i, r := range reqs {
		switch {
		case err != nil:
			r.err = err
		case refused[i] != nil:
			r.err = refused[i]
		default:
			r.res = r.arg.(groupWrite).result()
		}
	}
}

// createArg is one create as CreateMemory prepared it for its group.
type createArg struct {
	storeID, id, vid string
	in               store.CreateMemoryInput
	now              int64
}

func (a *createArg) apply(ctx context.Context, db *DB, tx *sql.Tx, st *lockedStore) (refused, err error) {
	// Stamped under the lock, as every other write, so created_at
	// follows seq order (the feed is pruned by time).
	a.now = db.now()
	return db.createIn(ctx, tx, st, a)
}

func (a *createArg) result() *store.Memory {
	return newMemory(a.id, a.storeID, a.vid, a.in.Path, a.in.Content, a.now)
}

// pathRefusal sorts checkPathFree's error: a path conflict refuses the
// write; anything else is the database's.
func pathRefusal(err error) (refused, dbErr error) {
	if errors.Is(err, store.ErrPathConflict) {
		return err, nil
	}
	return nil, err
}

// createIn checks and writes one create in tx. A refusal (archived store,
// path conflict, cap) is returned as refused, having written nothing; err
// is a database error, after which tx must be rolled back.
func (db *DB) createIn(ctx context.Context, tx *sql.Tx, st *lockedStore, a *createArg) (refused, err error) {
	if st.archived {
		return archivedErr(a.storeID), nil
	}
	if err := db.checkPathFree(ctx, tx, a.storeID, a.in.Path, ""); err != nil {
		return pathRefusal(err)
	}
	if st.memoryCount >= int64(db.opts.MaxMemoriesPerStore) {
		return limitErr(a.storeID), nil
	}
	if err := db.recordAs(ctx, tx, a.storeID, st, a.vid, change{op: store.OpCreated, memoryID: a.id, path: a.in.Path, content: &a.in.Content, actor: a.in.Actor}, a.now); err != nil {
		return nil, err
	}
	st.memoryCount++
	_, err = tx.ExecContext(ctx, db.d.q(`INSERT INTO memories (`+memoryColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		a.id, a.storeID, a.vid, a.in.Path, db.d.text(a.in.Content), store.SHA256Hex(a.in.Content), len(a.in.Content), a.now, a.now)
	return nil, mapErr(err)
}

// GetMemory reads a memory with its content.
func (db *DB) GetMemory(ctx context.Context, storeID, memoryID string) (*store.Memory, error) {
	m, err := scanMemory(db.sql.QueryRowContext(ctx, db.d.q(qGetMemory), storeID, memoryID), true)
	if errors.Is(err, sql.ErrNoRows) {
		if _, serr := db.GetStore(ctx, storeID); serr != nil {
			return nil, serr
		}
		return nil, notFoundMemory(memoryID)
	}
	return m, mapErr(err)
}

func preconditionFailed(memoryID, want, have string) error {
	return &store.Error{Kind: store.ErrPreconditionFailed, Code: "memory_precondition_failed",
		Message: "memory " + memoryID + " has content_sha256 " + have + ", not the expected " + want}
}

// UpdateMemory changes content and/or path under an optional
// precondition. Concurrent updates and deletes of one store run in groups,
// one transaction each (group.go; doc.go, "Grouped writes").
func (db *DB) UpdateMemory(ctx context.Context, storeID, memoryID string, in store.UpdateMemoryInput) (*store.Memory, error) {
	// As in CreateMemory: a path PostgreSQL would refuse as text must not
	// fail the other writes of its group.
	if in.Path != nil {
		if err := store.ValidatePath(*in.Path); err != nil {
			return nil, err
		}
	}
	return db.changes.do(ctx, storeID, &updateArg{storeID: storeID, memoryID: memoryID, in: in})
}

// updateArg is one update as UpdateMemory queued it; apply sets res.
type updateArg struct {
	storeID, memoryID string
	in                store.UpdateMemoryInput
	res               *store.Memory
}

func (a *updateArg) apply(ctx context.Context, db *DB, tx *sql.Tx, st *lockedStore) (refused, err error) {
	return db.updateIn(ctx, tx, st, a)
}

func (a *updateArg) result() *store.Memory { return a.res }

// updateIn checks and writes one update in tx, as createIn does a create,
// and sets a.res to the memory as GetMemory would read it right after this
// write: built from what was written, a value of its own, so a later write
// of the group to the same memory leaves it as it is.
func (db *DB) updateIn(ctx context.Context, tx *sql.Tx, st *lockedStore, a *updateArg) (refused, err error) {
	cur, refused, err := db.memoryIn(ctx, tx, a.storeID, a.memoryID, true)
	if cur == nil {
		return refused, err
	}
	if st.archived {
		return archivedErr(a.storeID), nil
	}
	if a.in.ExpectedSHA256 != nil && *a.in.ExpectedSHA256 != cur.ContentSHA256 {
		return preconditionFailed(a.memoryID, *a.in.ExpectedSHA256, cur.ContentSHA256), nil
	}
	newPath, newContent := cur.Path, *cur.Content
	if a.in.Path != nil {
		newPath = *a.in.Path
	}
	if a.in.Content != nil {
		newContent = *a.in.Content
	}
	if newPath == cur.Path && newContent == *cur.Content {
		a.res = cur // changes nothing: no version
		return nil, nil
	}
	prev := ""
	if newPath != cur.Path {
		if err := db.checkPathFree(ctx, tx, a.storeID, newPath, a.memoryID); err != nil {
			return pathRefusal(err)
		}
		prev = cur.Path
	}
	now := db.now()
	vid, err := db.record(ctx, tx, a.storeID, st, change{op: store.OpModified, memoryID: a.memoryID, path: newPath, prevPath: prev, content: &newContent, actor: a.in.Actor}, now)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, db.d.q(qUpdateMemory),
		vid, newPath, db.d.text(newContent), store.SHA256Hex(newContent), len(newContent), now, a.memoryID); err != nil {
		return nil, mapErr(err)
	}
	m := *cur
	m.MemoryVersionID, m.Path, m.Content = vid, newPath, &newContent
	m.ContentSHA256, m.ContentSizeBytes = store.SHA256Hex(newContent), int64(len(newContent))
	m.UpdatedAt = micros(now)
	a.res = &m
	return nil, nil
}

// DeleteMemory deletes a memory under an optional precondition, in a group
// as UpdateMemory.
func (db *DB) DeleteMemory(ctx context.Context, storeID, memoryID string, in store.DeleteMemoryInput) error {
	_, err := db.changes.do(ctx, storeID, &deleteArg{storeID: storeID, memoryID: memoryID, in: in})
	return err
}

// deleteArg is one delete as DeleteMemory queued it.
type deleteArg struct {
	storeID, memoryID string
	in                store.DeleteMemoryInput
}

func (a *deleteArg) apply(ctx context.Context, db *DB, tx *sql.Tx, st *lockedStore) (refused, err error) {
	return db.deleteIn(ctx, tx, st, a)
}

func (a *deleteArg) result() *store.Memory { return nil }

// memoryIn reads the memory a write of a group changes, as tx shows it
// (with its content if full). A memory that isn't there is the write's
// refusal; anything else failing is the database's error. cur is nil
// whenever either is set.
func (db *DB) memoryIn(ctx context.Context, tx *sql.Tx, storeID, memoryID string, full bool) (cur *store.Memory, refused, err error) {
	cur, err = scanMemory(tx.QueryRowContext(ctx, db.d.q(qGetMemory), storeID, memoryID), full)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFoundMemory(memoryID), nil
	}
	if err != nil {
		return nil, nil, mapErr(err)
	}
	return cur, nil, nil
}

// deleteIn checks and writes one delete in tx, as createIn does a create.
func (db *DB) deleteIn(ctx context.Context, tx *sql.Tx, st *lockedStore, a *deleteArg) (refused, err error) {
	cur, refused, err := db.memoryIn(ctx, tx, a.storeID, a.memoryID, false)
	if cur == nil {
		return refused, err
	}
	// An archived store still lets its memories be deleted (the SDK
	// documents it), unlike every other write.
	if a.in.ExpectedSHA256 != nil && *a.in.ExpectedSHA256 != cur.ContentSHA256 {
		return preconditionFailed(a.memoryID, *a.in.ExpectedSHA256, cur.ContentSHA256), nil
	}
	if _, err := db.record(ctx, tx, a.storeID, st, change{op: store.OpDeleted, memoryID: a.memoryID, path: cur.Path, actor: a.in.Actor}, db.now()); err != nil {
		return nil, err
	}
	st.memoryCount--
	_, err = tx.ExecContext(ctx, db.d.q(qDeleteMemory), a.memoryID)
	return nil, mapErr(err)
}
