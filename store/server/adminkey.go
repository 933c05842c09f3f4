package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/durable"
)

// AdminKeyFile is the name of the generated admin key file in the data
// dir, for the data dir's own database (memfs serve names the file of
// any other database after it).
const AdminKeyFile = "admin.key"

// ErrKeyFileNotThisDatabase is returned (wrapped, with the file's path)
// when the key file exists but the database has no admin key: the file
// opens another database, and it is never overwritten.
var ErrKeyFileNotThisDatabase = errors.New("the key file does not open this database, which has no admin key yet")

// AdminKeyResult says what EnsureAdminKey did.
type AdminKeyResult struct {
	// KeyFile is where the database's generated key is (empty when none
	// was generated now or before, or when the file there does not open
	// the database: see NotThisDatabase).
	KeyFile string
	// Generated is true when a new key was generated and written now.
	Generated bool
	// MadePrivate is true when the key file was open to group or others
	// and was made 0600 now.
	MadePrivate bool
	// NotThisDatabase names a key file that exists but whose key does not
	// open the database (which has admin keys of its own).
	NotThisDatabase string
}

// EnsureAdminKey is EnsureAdminKeyFile with the key file
// <dataDir>/admin.key.
func EnsureAdminKey(ctx context.Context, b store.KeyStore, given, dataDir string) (AdminKeyResult, error) {
	return EnsureAdminKeyFile(ctx, b, given, filepath.Join(dataDir, AdminKeyFile))
}

// EnsureAdminKeyFile makes sure the backend has an admin key. A given key
// is registered (its hash only) if new. With no key given and none
// stored, a random key is generated, its hash stored, and the key itself
// written to keyFile with mode 0600, durably (package durable). A key
// file that exists is never overwritten: when the database has no admin
// key, that is ErrKeyFileNotThisDatabase; when it has some that the
// file's key is not, the result says so. A key file that group or others
// may read is made 0600.
func EnsureAdminKeyFile(ctx context.Context, b store.KeyStore, given, keyFile string) (AdminKeyResult, error) {
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
	n, err := b.CountAPIKeys(ctx, store.KeyKindAdmin)
	if err != nil {
		return res, err
	}
	fi, err := os.Stat(keyFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if n > 0 {
			return res, nil
		}
		return generateAdminKey(ctx, b, keyFile)
	case err != nil:
		return res, fmt.Errorf("the admin key file: %w", err)
	case n == 0:
		return res, fmt.Errorf("%s: %w", keyFile, ErrKeyFileNotThisDatabase)
	}
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(keyFile, 0o600); err != nil {
			return res, fmt.Errorf("the admin key file %s is open to other users (mode %04o) and can't be made private: %w", keyFile, fi.Mode().Perm(), err)
		}
		res.MadePrivate = true
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return res, fmt.Errorf("the admin key file: %w", err)
	}
	_, err = b.LookupAPIKey(ctx, HashKey(strings.TrimSpace(string(key))))
	switch {
	case errors.Is(err, store.ErrUnauthorized):
		res.NotThisDatabase = keyFile
	case err != nil:
		return res, err
	default:
		res.KeyFile = keyFile
	}
	return res, nil
}

// generateAdminKey writes a new admin key to keyFile, which must not
// exist, then stores its hash.
func generateAdminKey(ctx context.Context, b store.KeyStore, keyFile string) (AdminKeyResult, error) {
	key := NewKey("sk-memfs-admin-")
	if err := durable.CreateFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		if errors.Is(err, os.ErrExist) { // written since the Stat
			return AdminKeyResult{}, fmt.Errorf("%s: %w", keyFile, ErrKeyFileNotThisDatabase)
		}
		return AdminKeyResult{}, fmt.Errorf("write the admin key: %w", err)
	}
	if _, err := b.CreateAPIKey(ctx, store.KeyKindAdmin, HashKey(key)); err != nil {
		os.Remove(keyFile)
		return AdminKeyResult{}, err
	}
	return AdminKeyResult{KeyFile: keyFile, Generated: true}, nil
}
