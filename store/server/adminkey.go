package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/durable"
)

// AdminKeyFile is the name of the generated admin key file in the data dir.
const AdminKeyFile = "admin.key"

// AdminKeyResult says what EnsureAdminKey did.
type AdminKeyResult struct {
	// KeyFile is where the generated key is (empty when none was generated
	// now or before).
	KeyFile string
	// Generated is true when a new key was generated and written now.
	Generated bool
	// MadePrivate is true when KeyFile was open to group or others and
	// was made 0600 now.
	MadePrivate bool
}

// EnsureAdminKey makes sure the backend has an admin key. A given key is
// registered (its hash only) if new. With no key given and none stored, a
// random key is generated, its hash stored, and the key itself written to
// <dataDir>/admin.key with mode 0600, durably (package durable). A key
// file from before that group or others may read is made 0600.
func EnsureAdminKey(ctx context.Context, b store.KeyStore, given, dataDir string) (AdminKeyResult, error) {
	var res AdminKeyResult
	if given != "" {
		if len(given) < 16 {
			return res, errors.New("the admin key must be at least 16 characters")
		}
		_, err := b.LookupAPIKey(ctx, HashKey(given))
		if errors.Is(err, store.ErrUnauthorized) {
			_, err = b.CreateAPIKey(ctx, store.KeyKindAdmin, HashKey(given))
		}
		return res, err
	}
	path := filepath.Join(dataDir, AdminKeyFile)
	n, err := b.CountAPIKeys(ctx, store.KeyKindAdmin)
	if err != nil {
		return res, err
	}
	if n > 0 {
		fi, err := os.Stat(path)
		if err != nil {
			return res, nil
		}
		res.KeyFile = path
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return res, fmt.Errorf("the admin key file %s is open to other users (mode %04o) and can't be made private: %w", path, fi.Mode().Perm(), err)
			}
			res.MadePrivate = true
		}
		return res, nil
	}
	key := NewKey("sk-memfs-admin-")
	if err := durable.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return res, fmt.Errorf("write the admin key: %w", err)
	}
	if _, err := b.CreateAPIKey(ctx, store.KeyKindAdmin, HashKey(key)); err != nil {
		os.Remove(path)
		return res, err
	}
	return AdminKeyResult{KeyFile: path, Generated: true}, nil
}
