package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

// ensureAdminKey makes sure the database dsn has an admin key (given, or
// generated into its key file: adminKeyFile) and says where it is.
func ensureAdminKey(ctx context.Context, db store.KeyStore, given, dataDir, dsn string, log logrus.FieldLogger) error {
	keyFile, dbName := adminKeyFile(dataDir, dsn)
	res, err := server.EnsureAdminKeyFile(ctx, db, given, keyFile)
	if errors.Is(err, server.ErrKeyFileNotThisDatabase) {
		return fmt.Errorf("%s holds an admin key, but not one of the database %s, which has none yet; "+
			"memfs serve never overwrites a key file. To make that key this database's admin key too, "+
			"give --admin-key-file %s; to have a new key generated, move %s away", keyFile, dbName, keyFile, keyFile)
	}
	if err != nil {
		return err
	}
	switch {
	case res.Generated:
		fmt.Printf("memfs serve: generated an admin key for %s; it is in %s (export MEMFS_API_KEY=$(cat %s))\n", dbName, res.KeyFile, res.KeyFile)
	case res.KeyFile != "":
		fmt.Printf("memfs serve: the admin key is in %s\n", res.KeyFile)
	}
	if res.MadePrivate {
		log.WithField("file", keyFile).Warn("the admin key file was open to other users; it is 0600 now, but other users may have read the key before")
	}
	if res.NotThisDatabase != "" {
		log.WithFields(logrus.Fields{"file": keyFile, "db": dbName}).Warn("the admin key file does not open this database, which has admin keys of its own")
	}
	return nil
}

// adminKeyFile is where memfs serve keeps the generated admin key of the
// database dsn, and that database's name for messages (no secret). The
// data dir's own database (<data-dir>/memfs.db, the default) has
// <data-dir>/admin.key; any other has admin-<name>-<hash>.key, <name>
// the SQLite file's base name or "postgres-" and the PostgreSQL database's,
// <hash> the first 8 hex digits of the SHA-256 of sqlstore.Target.Name:
// one data dir may serve several databases, and each key file belongs to
// one of them.
func adminKeyFile(dataDir, dsn string) (path, dbName string) {
	own := filepath.Join(dataDir, "memfs.db")
	t, err := sqlstore.ParseTarget(dsn)
	if dsn == "" || err != nil { // err: refused by checkDB before
		t = sqlstore.Target{Path: own}
	}
	dbName = t.Name()
	if !t.Postgres {
		if abs, err := filepath.Abs(own); err == nil && abs == dbName {
			return filepath.Join(dataDir, server.AdminKeyFile), dbName
		}
	}
	var label string
	if t.Postgres {
		_, db, _ := strings.Cut(strings.TrimPrefix(dbName, "postgres://"), "/")
		label = "postgres-" + db
	} else {
		label = strings.TrimSuffix(filepath.Base(dbName), filepath.Ext(dbName))
	}
	label = strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, label)
	if len(label) > 40 {
		label = label[:40]
	}
	sum := sha256.Sum256([]byte(dbName))
	return filepath.Join(dataDir, fmt.Sprintf("admin-%s-%s.key", label, hex.EncodeToString(sum[:4]))), dbName
}
