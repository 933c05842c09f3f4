package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memfs/memfs/internal/backoff"
	"github.com/sirupsen/logrus"
)

// notifyChannel is the PostgreSQL NOTIFY channel; the payload is a store id.
const notifyChannel = "memfs_changes"

// pgListener holds one dedicated connection that LISTENs for commits made
// by any process and wakes this process's waiters. It reconnects with
// capped backoff and, after a reconnect, wakes everyone (notifications
// sent while it was away are lost).
type pgListener struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// reconnectBackoff spaces the listener's attempts to reconnect: from
// 100 ms, doubling, capped at 10 s, jittered so that the servers sharing a
// database do not all reconnect at the same instant after it restarts.
var reconnectBackoff = backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: backoff.Equal}

func startListener(ctx context.Context, dsn string, h waiters, log logrus.FieldLogger) (*pgListener, error) {
	conn, err := listenConn(ctx, dsn)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	l := &pgListener{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			err := listenLoop(lctx, conn, h)
			conn.Close(context.Background())
			if lctx.Err() != nil {
				return
			}
			log.WithError(err).Warn("postgres LISTEN connection lost; reconnecting")
			for attempt := 0; ; attempt++ {
				select {
				case <-lctx.Done():
					return
				case <-time.After(reconnectBackoff.Delay(attempt)):
				}
				conn, err = listenConn(lctx, dsn)
				if err == nil {
					h.notifyAll()
					break
				}
			}
		}
	}()
	return l, nil
}

func listenConn(ctx context.Context, dsn string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres listener: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("postgres LISTEN: %w", err)
	}
	return conn, nil
}

func listenLoop(ctx context.Context, conn *pgx.Conn, h waiters) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.notify(n.Payload)
	}
}

// waiters are the two kinds of waiters a NOTIFY can wake: change-feed
// waiters (hub, a store id or "events:" payload) wake all at once, work
// polls (queueWaiters, a "queue:" payload) one at a time.
type waiters struct {
	feed  *hub
	queue *queueWaiters
}

// notify routes a NOTIFY payload to its waiters.
func (w waiters) notify(payload string) {
	if strings.HasPrefix(payload, queuePrefix) {
		w.queue.wake(payload)
		return
	}
	w.feed.notify(payload)
}

// notifyAll wakes every waiter of both kinds.
func (w waiters) notifyAll() {
	w.feed.notifyAll()
	w.queue.wakeAll()
}

func (l *pgListener) close() {
	l.cancel()
	l.wg.Wait()
}
