//go:build integration

package syncer_test

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/test/testenv"
)

// What the node watcher costs where it runs (beside slurmctld), which the syncer's traffic does
// not show: its CPU (sunk-nodewatch and its reader), and the RPCs slurmctld serves.

// nodewatchProcess runs the real sunk-nodewatch (built from this checkout) with its reader of
// env's slurmctld every interval, as in a slurmctld pod, and returns its URL and process id.
func nodewatchProcess(b *testing.B, env *testenv.SlurmEnv, interval time.Duration) (string, int) {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr, env.NodeWatcherProcess(b, addr, env.User, interval)
}

// treeCPU is the CPU time of process root and its descendants (/proc/PID/stat: utime and
// stime, in USER_HZ ticks).
func treeCPU(root int) time.Duration {
	if root == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	ppid, ticks := map[int]int{}, map[int]int64{}
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(raw)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:]) // state ppid pgrp ... utime(12th) stime(13th)
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		pp, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ppid[pid], ticks[pid] = pp, ut+st
	}
	var sum int64
	for pid, t := range ticks {
		for p := pid; p > 1; p = ppid[p] {
			if p == root {
				sum += t
				break
			}
		}
	}
	return time.Duration(sum) * time.Second / 100
}

// rpcCounts are slurmctld's RPC counts by message type (sdiag), without sdiag's own.
func rpcCounts(b *testing.B, env *testenv.SlurmEnv) map[string]int64 {
	out, err := env.Exec("sdiag")
	if err != nil {
		b.Fatalf("sdiag: %v: %s", err, out)
	}
	counts := map[string]int64{}
	by, _, _ := strings.Cut(out, "Remote Procedure Call statistics by user")
	for _, m := range regexp.MustCompile(`(?m)^\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)`).FindAllStringSubmatch(by, -1) {
		if m[1] == "REQUEST_STATS_INFO" {
			continue
		}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		counts[m[1]] = n
	}
	return counts
}

// rpcRates are the RPCs per second between two rpcCounts: all of them, and node table reads.
func rpcRates(before, after map[string]int64, wall float64) (all, nodeInfo float64) {
	var total int64
	for k, v := range after {
		total += v - before[k]
	}
	return float64(total) / wall, float64(after["REQUEST_NODE_INFO"]-before["REQUEST_NODE_INFO"]) / wall
}
