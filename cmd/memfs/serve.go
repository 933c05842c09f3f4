package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/memfs/memfs/store"
	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/store/sqlstore"
)

func init() {
	register("serve", "run the store service (the Memory Stores API)", runServe)
}

// serveConfig is what `memfs serve` is told by flags and environment.
type serveConfig struct {
	listen, db, dataDir, adminKey string
	memoryRoot                    string
	maxMemories                   int
	changeRetention               time.Duration
	changeFeed                    bool
	sqliteSync                    string
	logFormat, logLevel           string
	metricsListen                 string
	// maxConns and maxConnsPerAddr are --max-connections and
	// --max-connections-per-address (0: derived from RLIMIT_NOFILE);
	// conns is what they come to (zero: serve derives the defaults).
	maxConns, maxConnsPerAddr int
	conns                     server.ConnLimits
	// idleTimeout and readTimeout are --idle-timeout and --read-timeout
	// (0: the defaults).
	idleTimeout, readTimeout time.Duration
	// metrics receives the request metrics (nil: none); memfs up shares
	// its registry with the worker's metrics.
	metrics prometheus.Registerer
	// adminKeyFlag is where runServe finds adminKey (--admin-key,
	// --admin-key-file, MEMFS_ADMIN_KEY); memfs up sets adminKey itself.
	adminKeyFlag *keyFlag
	// tlsCertFile and tlsKeyFile are --tls-cert-file and --tls-key-file;
	// tls is their pair, read by runServe (nil: plain HTTP).
	tlsCertFile, tlsKeyFile string
	tls                     *certPair
	// ln, when set, is the socket to serve on, bound by the caller
	// (memfs up binds before it writes its admin key); else serve binds
	// listen itself.
	ln net.Listener
}

// listenFirst binds the service's socket. It comes before anything is
// created in the data dir (the database, admin.key): a port already taken
// must leave no new files behind, and the error says what to do. The
// address's form is checkListen's, before.
func listenFirst(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = " (is another memfs serve running? pick another --listen)"
		}
		return nil, fmt.Errorf("listen on %s: %w%s; nothing was created", addr, err, hint)
	}
	return ln, nil
}

// checkListen refuses a --listen that is not HOST:PORT with a port net
// can bind (0 to 65535, or a service name): a usage error, found before
// anything is bound or created.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return usagef("--listen must be HOST:PORT with a port from 0 to 65535, like 127.0.0.1:8080 (port 0 picks a free one), not %q", addr)
	}
	return nil
}

// checkDB refuses a --db that is neither a SQLite file nor a PostgreSQL
// URL (sqlstore.ParseTarget): a usage error, before anything is created.
func checkDB(dsn string) error {
	if dsn == "" {
		return nil
	}
	if _, err := sqlstore.ParseTarget(dsn); err != nil {
		return usagef("--db %q is not a database memfs serve can use: give a SQLite file (a path, file:PATH or sqlite:PATH) or a PostgreSQL URL (postgres://… or postgresql://…); nothing was created", dsn)
	}
	return nil
}

func (c *serveConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.listen, "listen", envOr("127.0.0.1:8080", "MEMFS_LISTEN"), "address to listen on (env MEMFS_LISTEN); port 0 picks a free one")
	fs.StringVar(&c.db, "db", envOr("", "MEMFS_DB"), "database: a SQLite file (PATH, file:PATH or sqlite:PATH) or a postgres:// URL (env MEMFS_DB; default <data-dir>/memfs.db)")
	fs.StringVar(&c.dataDir, "data-dir", envOr(defaultDataDir(), "MEMFS_DATA_DIR"), "directory for the SQLite database and the generated admin key (env MEMFS_DATA_DIR)")
	c.adminKeyFlag = addKeyFlag(fs, "admin-key", "an admin API key to accept (when none is given or stored, one is generated into <data-dir>/admin.key)", "MEMFS_ADMIN_KEY")
	fs.StringVar(&c.memoryRoot, "memory-root", envOr("/mnt/memory", "MEMFS_MEMORY_ROOT"), "parent of the mount paths given to sessions (env MEMFS_MEMORY_ROOT)")
	fs.IntVar(&c.maxMemories, "max-memories-per-store", store.DefaultMaxMemories, fmt.Sprintf("memories one store may hold (1 to %d)", store.MaxMemoriesLimit))
	fs.DurationVar(&c.changeRetention, "change-retention", 7*24*time.Hour, "how long the change feed keeps entries; older cursors get 410 and re-list")
	fs.BoolVar(&c.changeFeed, "change-feed", true, "offer the change feed (a memfs extension); with --change-feed=false its route answers 404 as the hosted API does, and mounts follow their stores through the memory versions")
	fs.StringVar(&c.sqliteSync, "sqlite-synchronous", "FULL", "SQLite synchronous mode: FULL (survives power loss) or NORMAL (survives process crashes)")
	fs.IntVar(&c.maxConns, "max-connections", 0, fmt.Sprintf("client connections open at once (default: the open-file limit, RLIMIT_NOFILE, less %d for the database; a quarter is kept for clients that have authenticated)", server.ReservedFDs))
	fs.IntVar(&c.maxConnsPerAddr, "max-connections-per-address", 0, "connections from one IP address that have not authenticated yet (default: an eighth of those not kept for authenticated clients, at most 1024)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", defaultIdleTimeout, "how long a connection may stay open between requests")
	fs.DurationVar(&c.readTimeout, "read-timeout", defaultReadTimeout, "how long a client has to send a request's headers, and then its body (long polls and event streams send none, and are not bounded by it)")
	fs.StringVar(&c.tlsCertFile, "tls-cert-file", envOr("", "MEMFS_TLS_CERT_FILE"), "serve HTTPS with this PEM certificate (chain), with --tls-key-file; both are read again on SIGHUP (env MEMFS_TLS_CERT_FILE)")
	fs.StringVar(&c.tlsKeyFile, "tls-key-file", envOr("", "MEMFS_TLS_KEY_FILE"), "the PEM private key of --tls-cert-file (env MEMFS_TLS_KEY_FILE)")
	addLogFlags(fs, &c.logFormat, &c.logLevel)
	addMetricsFlag(fs, &c.metricsListen)
}

// checkTLS reads the TLS pair when one is given: both files or neither,
// and a pair that loads and matches, else a usage error (before anything
// is bound or created).
func (c *serveConfig) checkTLS() error {
	if (c.tlsCertFile == "") != (c.tlsKeyFile == "") {
		return usagef("--tls-cert-file and --tls-key-file go together: give both (HTTPS) or neither (plain HTTP)")
	}
	if c.tlsCertFile == "" {
		return nil
	}
	p, err := loadCertPair(c.tlsCertFile, c.tlsKeyFile)
	if err != nil {
		return usagef("%v", err)
	}
	c.tls = p
	return nil
}

// checkMaxMemories refuses a cap no store can use: below 1, or above
// store.MaxMemoriesLimit, the most a mount was measured to handle.
func checkMaxMemories(n int) error {
	if n < 1 || n > store.MaxMemoriesLimit {
		return usagef("--max-memories-per-store must be 1 to %d, not %d (a mount holds its whole store in memory; %d is the most that is measured and supported)",
			store.MaxMemoriesLimit, n, store.MaxMemoriesLimit)
	}
	return nil
}

// defaultDataDir is /var/lib/memfs as root, else $XDG_DATA_HOME/memfs
// (~/.local/share/memfs).
func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/memfs"
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "memfs")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "memfs")
}

func runServe(args []string) error {
	var c serveConfig
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: memfs serve [flags]

Runs the store service: the Memory Stores API (wire-compatible with the
Claude Managed Agents API) on SQLite (default) or PostgreSQL (--db
postgres://...). On first start without an admin key it generates one,
keeps only its hash, and writes the key to <data-dir>/admin.key (mode
0600; for a --db other than <data-dir>/memfs.db, to a file named after
that database; an existing key file is never overwritten). To choose
the key yourself, give --admin-key-file FILE (mode 0600) or
MEMFS_ADMIN_KEY; --admin-key works too, but shows the key to every user
of the host in ps. SIGTERM or SIGINT finishes in-flight requests and
exits 0.

With --tls-cert-file and --tls-key-file it serves HTTPS (TLS 1.2 or
later). SIGHUP reads both files again: new connections get the new
certificate; a pair that does not load or match is logged as an error and
the previous one goes on serving. Clients on other hosts need https://:
they refuse to send a key over plain http:// to anything but loopback.

Exit status: 0 stopped by a signal; 1 an error (an address already in
use is found before anything is created in --data-dir); 2 a usage error
(a bad flag, a --listen that is not HOST:PORT, a --db of another scheme,
one TLS file without the other, a TLS pair that does not load or match).

Flags:
`)
		fs.PrintDefaults()
	}
	c.flags(fs)
	err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if c.adminKey, err = c.adminKeyFlag.resolve(os.Getenv); err != nil {
		return err
	}
	if err := checkListen(c.listen); err != nil {
		return err
	}
	if err := checkDB(c.db); err != nil {
		return err
	}
	if err := checkMaxMemories(c.maxMemories); err != nil {
		return err
	}
	if err := c.checkTLS(); err != nil {
		return err
	}
	if c.idleTimeout <= 0 || c.readTimeout <= 0 {
		return usagef("--idle-timeout and --read-timeout must be more than 0, not %s and %s", c.idleTimeout, c.readTimeout)
	}
	nofile, err := openFileLimit()
	if err != nil {
		return err
	}
	if c.conns, err = connLimits(nofile, c.maxConns, c.maxConnsPerAddr); err != nil {
		return err
	}
	log, err := newLogger(c.logFormat, c.logLevel)
	if err != nil {
		return usagef("%v", err)
	}
	me, err := listenMetrics("serve", c.metricsListen, log)
	if err != nil {
		return err
	}
	defer me.Close()
	c.metrics = me.registerer()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	scheme := "http"
	if c.tls != nil {
		scheme = "https"
	}
	return serve(ctx, c, log, func(addr string) {
		fmt.Printf("memfs serve: listening on %s://%s\n", scheme, addr)
	})
}

// setDefaults fills in what memfs up leaves unset: the connection limits
// (from the open-file limit) and the timeouts.
func (c *serveConfig) setDefaults() error {
	if c.conns.MaxOpen == 0 {
		nofile, err := openFileLimit()
		if err != nil {
			return err
		}
		if c.conns, err = server.DefaultConnLimits(nofile); err != nil {
			return err
		}
	}
	if c.idleTimeout <= 0 {
		c.idleTimeout = defaultIdleTimeout
	}
	if c.readTimeout <= 0 {
		c.readTimeout = defaultReadTimeout
	}
	return nil
}

// serve runs the service until ctx ends, then shuts down gracefully.
// ready is called with the bound address once requests are accepted.
func serve(ctx context.Context, c serveConfig, log *logrus.Logger, ready func(addr string)) error {
	ln := c.ln
	if ln == nil {
		var err error
		if ln, err = listenFirst(c.listen); err != nil {
			return err
		}
	}
	defer ln.Close() // hs.Shutdown closes it too; this covers the errors before
	if err := c.setDefaults(); err != nil {
		return err
	}
	dsn := c.db
	if dsn == "" {
		dsn = filepath.Join(c.dataDir, "memfs.db")
	}
	db, err := sqlstore.Open(ctx, dsn, sqlstore.Options{MaxMemoriesPerStore: c.maxMemories, SQLiteSynchronous: c.sqliteSync, Log: log})
	if err != nil {
		return err
	}
	defer db.Close()
	warnOpenDirs(log, c.dataDir, dsn)
	if err := ensureAdminKey(ctx, db, c.adminKey, c.dataDir, dsn, log); err != nil {
		return err
	}
	srv, err := server.New(server.Options{Backend: db, Log: log, MemoryRoot: c.memoryRoot, Metrics: c.metrics, BodyReadTimeout: c.readTimeout, NoChangeFeed: !c.changeFeed})
	if err != nil {
		return err
	}
	guard, err := server.NewConnGuard(c.conns, log)
	if err != nil {
		return err
	}
	// No ReadTimeout or WriteTimeout: they would cut the work polls,
	// change-feed waits and event streams, which bound themselves; the
	// body has its own bound (BodyReadTimeout), and ConnGuard closes idle
	// connections when the limits are reached.
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: c.readTimeout, IdleTimeout: c.idleTimeout, ConnContext: server.ConnContext}
	if c.tls != nil {
		// The handshake is bounded by ReadHeaderTimeout, as a request's
		// headers are. HTTP/1.1 only, as over plain HTTP: ConnGuard's
		// rules (connTable) take a connection to carry one request at a
		// time, which HTTP/2 streams would not.
		hs.TLSConfig = c.tls.config()
		hs.Protocols = new(http.Protocols)
		hs.Protocols.SetHTTP1(true)
		stopReload := c.tls.watchReload(ctx, log)
		defer stopReload()
	}
	served := make(chan error, 1)
	go func() {
		if c.tls != nil {
			served <- hs.ServeTLS(guard.Listener(ln), "", "")
			return
		}
		served <- hs.Serve(guard.Listener(ln))
	}()
	pruneDone := make(chan struct{})
	pruneCtx, cancelPrune := context.WithCancel(context.Background())
	go func() {
		defer close(pruneDone)
		pruneChanges(pruneCtx, db, c.changeRetention, log)
	}()
	ready(ln.Addr().String())
	log.WithFields(logrus.Fields{"addr": ln.Addr().String(), "db": db.Dialect()}).Info("memfs serve started")

	select {
	case err := <-served:
		cancelPrune()
		<-pruneDone
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	srv.BeginShutdown()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	cancelPrune()
	<-pruneDone
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("memfs serve stopped")
	return nil
}

// pruneChanges drops change-feed entries older than retention, hourly.
func pruneChanges(ctx context.Context, db store.ChangeFeed, retention time.Duration, log logrus.FieldLogger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := db.PruneChanges(ctx, time.Now().Add(-retention)); err != nil && ctx.Err() == nil {
			log.WithError(err).Warn("pruning the change feed failed; will retry")
		} else if n > 0 {
			log.WithField("entries", n).Debug("pruned the change feed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// warnOpenDirs logs one warning for each directory memfs serve keeps
// files in (the data dir; the SQLite database's, when --db puts it
// elsewhere) that group or others may read or enter. The files in them are
// 0600 whatever the directory (sqlstore, server.EnsureAdminKey), so this
// only warns: others can still list their names and sizes, and a
// directory made 0755 by hand may be meant to hold more. A directory that
// does not exist (a PostgreSQL --db with a given key) is not used.
func warnOpenDirs(log logrus.FieldLogger, dataDir, dsn string) {
	dirs := []string{dataDir}
	if db := sqlitePath(dsn); db != "" && filepath.Dir(db) != filepath.Clean(dataDir) {
		dirs = append(dirs, filepath.Dir(db))
	}
	for _, d := range dirs {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o077 == 0 {
			continue
		}
		log.WithField("dir", d).Warnf("the data directory is open to other users (mode %04o): the database and key files in it are 0600, "+
			"but others can list them; make it private: chmod 700 %s", fi.Mode().Perm(), d)
	}
}

// sqlitePath is the file of a SQLite --db value, "" for PostgreSQL (or a
// value checkDB refuses).
func sqlitePath(dsn string) string {
	t, err := sqlstore.ParseTarget(dsn)
	if err != nil || t.Postgres {
		return ""
	}
	return t.Path
}
