package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/memfs/memfs/store"
)

// ListMemories lists memories in byte-wise path order. With Depth n > 0, a
// memory more than n levels below the prefix is rolled up into a
// memory_prefix item for its level-n directory, placed where that
// directory's first memory would be; the listing then resumes past the
// directory's subtree. (The hosted API defines depth 0 and 1; deeper values
// follow the same rule: docs/api.md, "Choices where the hosted API's
// documentation left one".) On an error no page is returned, never a partial one.
func (db *DB) ListMemories(ctx context.Context, storeID string, opts store.ListMemoriesOptions) (store.Page[store.MemoryListItem], error) {
	var page store.Page[store.MemoryListItem]
	if _, err := db.GetStore(ctx, storeID); err != nil {
		return page, err
	}
	tok, err := decodeToken(opts.Page)
	if err != nil {
		return page, err
	}
	limit := clampLimit(opts.Limit, opts.Full)
	prefix := opts.PathPrefix
	if prefix == "" {
		prefix = "/"
	}
	// Range of the prefix's subtree: [prefix, end).
	end := subtreeEnd(strings.TrimSuffix(prefix, "/"))
	if prefix == "/" {
		end = "0"
	}
	bound, exclusive := prefix, false
	if opts.Page != "" {
		bound, exclusive = tok.K, tok.X
		if bound < prefix {
			bound, exclusive = prefix, false
		}
	}
	cols := memoryColumns
	if !opts.Full {
		cols = strings.Replace(memoryColumns, "content", "'' AS content", 1)
	}
	for len(page.Data) < limit {
		op := ">="
		if exclusive {
			op = ">"
		}
		want := limit - len(page.Data) + 1
		rows, err := db.sql.QueryContext(ctx, db.d.q(qListPage(cols, op)),
			storeID, bound, end, want)
		if err != nil {
			return store.Page[store.MemoryListItem]{}, mapErr(err)
		}
		var batch []*store.Memory
		for rows.Next() {
			m, err := scanMemory(rows, opts.Full)
			if err != nil {
				rows.Close()
				return store.Page[store.MemoryListItem]{}, mapErr(err)
			}
			batch = append(batch, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return store.Page[store.MemoryListItem]{}, mapErr(err)
		}
		if len(batch) == 0 {
			return page, nil
		}
		rolledUp := false
		for _, m := range batch {
			if len(page.Data) == limit {
				page.NextPage = encodeToken(pageToken{K: bound, X: exclusive})
				return page, nil
			}
			rest := m.Path[len(prefix):]
			if i := nthSlash(rest, opts.Depth); i >= 0 {
				dir := prefix + rest[:i]
				page.Data = append(page.Data, store.MemoryListItem{Prefix: dir + "/"})
				bound, exclusive = subtreeEnd(dir), false
				rolledUp = true
				break // re-query past the directory's subtree
			}
			page.Data = append(page.Data, store.MemoryListItem{Memory: m})
			bound, exclusive = m.Path, true
		}
		if !rolledUp && len(batch) < want {
			return page, nil // the range is exhausted
		}
	}
	// Page full: is there anything after bound?
	op := ">="
	if exclusive {
		op = ">"
	}
	// Only sql.ErrNoRows means "nothing more": any other error (a timeout,
	// a lost connection, SQLITE_BUSY) must fail the listing, because a
	// full page answered as the last one tells the client the store ends
	// here, and a sync client drops what it did not see.
	var one int
	err = db.sql.QueryRowContext(ctx, db.d.q(qListMore(op)), storeID, bound, end).Scan(&one)
	switch {
	case err == nil:
		page.NextPage = encodeToken(pageToken{K: bound, X: exclusive})
	case !errors.Is(err, sql.ErrNoRows):
		return store.Page[store.MemoryListItem]{}, mapErr(err)
	}
	return page, nil
}

// nthSlash returns the index of the n-th '/' in s, or -1 when n <= 0 or s
// has fewer.
func nthSlash(s string, n int) int {
	if n <= 0 {
		return -1
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}
