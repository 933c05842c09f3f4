package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/memfs/memfs/store/server"
	"github.com/memfs/memfs/syncqueue"
)

var i1opts struct {
	interval  time.Duration
	intervals int
}

func init() {
	flag.DurationVar(&i1opts.interval, "i1interval", syncqueue.MinInterval, "I1: the mounts' sync interval")
	flag.IntVar(&i1opts.intervals, "i1intervals", 6, "I1: idle intervals counted")
	measures = append(measures, measure{id: "I1", run: runS("I1", benchI1)})
}

// benchI1: requests per idle interval per mount, with and without the
// change feed (docs/api.md, "The change feed"), at 10 and 10,000 memories. One database behind
// two in-process memfs serve handlers, one with the feed and one with
// NoChangeFeed (as memfs serve --change-feed=false, and the hosted API);
// each of the four mounts is untouched, counted by its User-Agent over
// the same window of several intervals, which starts once every mount has
// its content. With the feed, the idle cost is the long poll (one per
// PollWait, 25 s); without it, the versions listing (one per interval).
// Goal without the feed: at most one request per interval per mount.
func benchI1(ctx context.Context, cfg config, env *sEnv) (_ []row, retErr error) {
	interval, k := i1opts.interval, i1opts.intervals
	if k < 1 {
		return nil, errors.New("-i1intervals must be at least 1")
	}
	var undo cleanups
	defer func() {
		if cerr := undo.run(); cerr != nil && retErr == nil {
			retErr = cerr
		}
	}()
	// The same database without the feed, on a listener of its own.
	srv, err := server.New(server.Options{Backend: env.db, Log: env.log, NoChangeFeed: true})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: env.counter.wrap(srv)}
	go hs.Serve(ln)
	undo.add(func() error { srv.BeginShutdown(); return hs.Close() })
	// A view of env on that listener: mounts only read base and key.
	noFeed := &sEnv{base: "http://" + ln.Addr().String(), key: env.key, counter: env.counter, admin: env.admin, db: env.db, log: env.log}

	type one struct {
		label string
		size  int
		feed  bool
		m     *memfsMount
	}
	var mounts []*one
	for _, size := range []int{10, 10000} {
		storeID, err := env.seedStore(ctx, fmt.Sprintf("i1-%d", size), sLayout{size, 20})
		if err != nil {
			return nil, err
		}
		for _, feed := range []bool{true, false} {
			o := &one{label: fmt.Sprintf("memfs-bench-i1-%d-feed-%t", size, feed), size: size, feed: feed}
			e := env
			if !feed {
				e = noFeed
			}
			if o.m, err = e.mountMemfsQuiet(ctx, storeID, o.label, interval, 0, nil); err != nil {
				return nil, err
			}
			undo.add(o.m.close)
			mounts = append(mounts, o)
		}
	}
	// The window starts once every mount has all its content.
	deadline := time.Now().Add(5 * time.Minute)
	for _, o := range mounts {
		for {
			st := o.m.m.Engine().Status()
			if st.Content.Fetched >= st.Content.Total {
				want := syncqueue.FollowsFeed
				if !o.feed {
					want = syncqueue.FollowsVersions
				}
				if st.Follows != want {
					return nil, fmt.Errorf("%s follows %q, want %q", o.label, st.Follows, want)
				}
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%s: content not fetched within 5 minutes", o.label)
			}
			if err := sleepOrStop(ctx, 50*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	before := map[string]map[string]int{}
	for _, o := range mounts {
		before[o.label] = env.counter.snapshot(o.label)
	}
	window := time.Duration(k) * interval
	if err := sleepOrStop(ctx, window); err != nil {
		return nil, err
	}
	var rows []row
	for _, o := range mounts {
		d, n := diffCounts(before[o.label], env.counter.snapshot(o.label))
		per := float64(n) / float64(k)
		way, goal := "with the feed", "—"
		if !o.feed {
			way = "without the feed (versions)"
			goal = "≤ 1 per interval: no"
			if per <= 1 {
				goal = "≤ 1 per interval: yes"
			}
		}
		rows = append(rows,
			row{"I1", fmt.Sprintf("requests per idle interval per mount, %d memories, %s, %s interval, over %d intervals (%s)", o.size, way, interval, k, window),
				fmt.Sprintf("%.2f (%d in the window)", per, n), "—", "—", goal},
			row{"I1", "— requests in the window, by kind", countsText(d), "—", "—", "—"})
	}
	return rows, nil
}
