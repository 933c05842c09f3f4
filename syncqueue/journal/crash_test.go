package journal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

const killHelperEnv = "SYNCQUEUE_KILL_HELPER_DIR"

// TestKillHelper is not a test: run by TestKilledProcessLosesNothing as a
// child process, it writes records until it is killed, printing each one
// after the call returned. Its owner goroutine compacts now and then, so
// some kills land in a compaction.
func TestKillHelper(t *testing.T) {
	dir := os.Getenv(killHelperEnv)
	if dir == "" {
		t.Skip("helper process for TestKilledProcessLosesNothing")
	}
	j, err := Open(dir, Options{
		GroupCommit:     2 * time.Millisecond,
		CompactMinBytes: 32 << 10, // kills land in compactions too
		Auth:            testAuth,
	})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	pad := strings.Repeat(".", 500)
	for i := 1; ; i++ {
		id := fmt.Sprintf("f%d", i%10)
		lsn, err := j.Put(id, "/"+id, []byte(fmt.Sprintf("%d%s", i, pad)))
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stdout, "P %d %d\n", i, lsn) // unbuffered: one write
		if i%3 == 0 {
			if err := j.Confirm(id, lsn, "mem_"+id, fmt.Sprint("sha", i), "/"+id); err != nil {
				fmt.Println("ERR", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stdout, "C %d\n", i)
		}
	}
}

func TestKilledProcessLosesNothing(t *testing.T) {
	for round := range 3 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), killHelperEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lastPut := map[string]int{}    // file -> last acknowledged Put
		lastLSN := map[string]uint64{} // file -> its LSN
		confirmed := map[int]bool{}    // acknowledged Confirms
		sc := bufio.NewScanner(out)
		lines := 0
		killAt := 2000 + 700*round
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "P":
				i, _ := strconv.Atoi(f[1])
				lsn, _ := strconv.ParseUint(f[2], 10, 64)
				id := fmt.Sprintf("f%d", i%10)
				lastPut[id], lastLSN[id] = i, lsn
			case len(f) == 2 && f[0] == "C":
				i, _ := strconv.Atoi(f[1])
				confirmed[i] = true
			default:
				t.Fatalf("helper: %q", sc.Text())
			}
			if lines++; lines == killAt {
				cmd.Process.Kill() // SIGKILL; lines already in the pipe still count
			}
		}
		cmd.Wait()
		if lines < killAt {
			t.Fatalf("helper stopped after %d lines", lines)
		}

		opts, _ := testOpts()
		j := open(t, dir, opts)
		pending := pendingByID(j)
		for id, i := range lastPut {
			e, ok := pending[id]
			if !ok {
				// Only a confirmation (perhaps not yet printed) may
				// have released the last acknowledged Put.
				if i%3 != 0 {
					t.Fatalf("round %d: %s: acknowledged Put %d lost", round, id, i)
				}
				continue
			}
			v, err := strconv.Atoi(strings.TrimRight(string(e.Content), "."))
			if err != nil || v < i || v%10 != i%10 || e.LSN < lastLSN[id] {
				t.Fatalf("round %d: %s: pending %q lsn %d, last acknowledged Put %d lsn %d", round, id, e.Content[:8], e.LSN, i, lastLSN[id])
			}
			if v == i && confirmed[i] {
				t.Fatalf("round %d: %s: confirmed Put %d is pending again", round, id, i)
			}
			if i > 3 && e.Origin != "mem_"+id {
				t.Fatalf("round %d: %s: origin %q after earlier confirmations", round, id, e.Origin)
			}
		}
		closeJ(t, j)
	}
}
