package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

// TestAuthStorms drives the 401 detector with explicit times: the 5th 401
// within a minute warns, then at most one warning a minute, an address
// quiet for a window is forgotten, and beyond maxAddrs new addresses are
// counted together.
func TestAuthStorms(t *testing.T) {
	log, hook := test.NewNullLogger()
	a := &authStorms{threshold: 5, window: time.Minute, maxAddrs: 4, log: log}
	t0 := time.Unix(1_000_000, 0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	warnings := func() []*logrus.Entry {
		var out []*logrus.Entry
		for _, e := range hook.AllEntries() {
			if e.Level == logrus.WarnLevel {
				out = append(out, e)
			}
		}
		hook.Reset()
		return out
	}
	wantWarning := func(when, remote string, refused int) {
		t.Helper()
		ws := warnings()
		if len(ws) != 1 || ws[0].Data["remote"] != remote || ws[0].Data["refused"] != refused {
			var got []logrus.Fields
			for _, w := range ws {
				got = append(got, w.Data)
			}
			t.Fatalf("%s: warnings %v, want one for %s with refused=%d", when, got, remote, refused)
		}
	}
	wantNone := func(when string) {
		t.Helper()
		if ws := warnings(); len(ws) != 0 {
			t.Fatalf("%s: %d warnings (%v), want none", when, len(ws), ws[0].Data)
		}
	}

	// A storm from one address: 401s every second.
	for i := 0; i < 4; i++ {
		a.refused("192.0.2.1:4000", sec(i))
	}
	wantNone("4 401s")
	a.refused("192.0.2.1:4001", sec(4)) // another port: the same address
	wantWarning("the 5th 401 within a minute", "192.0.2.1", 5)
	for i := 5; i < 64; i++ {
		a.refused("192.0.2.1:4000", sec(i))
	}
	wantNone("the rest of the minute after a warning")
	a.refused("192.0.2.1:4000", sec(64))
	wantWarning("a minute after the last warning", "192.0.2.1", 60)

	// 401s spread over more than a window: never a storm.
	for i := 0; i < 10; i++ {
		a.refused("192.0.2.2:1", sec(100+20*i))
	}
	wantNone("one 401 every 20 s")

	// Forgetting: by a window after their last 401 (and warning), both
	// addresses are gone once another 401 makes the table sweep.
	a.refused("192.0.2.3:1", sec(1000))
	a.mu.Lock()
	_, stormy := a.addrs["192.0.2.1"]
	_, slow := a.addrs["192.0.2.2"]
	n := len(a.addrs)
	a.mu.Unlock()
	if stormy || slow || n != 1 {
		t.Fatalf("after 10 quiet minutes: %d addresses remembered (192.0.2.1: %v, 192.0.2.2: %v), want only 192.0.2.3", n, stormy, slow)
	}

	// Full table: new addresses share one entry, which warns like any.
	for i := 4; i <= 6; i++ {
		a.refused(fmt.Sprintf("192.0.2.%d:1", i), sec(1001))
	}
	for i := 0; i < 5; i++ {
		a.refused(fmt.Sprintf("198.51.100.%d:1", i), sec(1002+i))
	}
	wantWarning("5 401s from 5 addresses beyond the table", overflowAddr, 5)
	a.mu.Lock()
	n = len(a.addrs)
	a.mu.Unlock()
	if n != a.maxAddrs+1 {
		t.Fatalf("%d addresses remembered, want %d (the table and the overflow entry)", n, a.maxAddrs+1)
	}
}
