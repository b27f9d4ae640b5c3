//go:build integration

package syncer_test

import (
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
// not show: its reader's CPU, and the RPCs slurmctld serves.

// readerCPU is the CPU time of this process's sunk-slurm-nodes readers (their comm, under this
// process: another test's reader on the same machine is not counted).
func readerCPU(b *testing.B) time.Duration {
	self := os.Getpid()
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	type stat struct {
		ppid  int
		comm  string
		ticks int64
	}
	all := map[int]stat{}
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
		f := strings.Fields(s[closing+1:]) // state ppid pgrp ... utime(12) stime(13)
		if len(f) < 13 {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		all[pid] = stat{ppid: ppid, comm: s[open+1 : closing], ticks: ut + st}
	}
	var ticks int64
	for pid, s := range all {
		if !strings.HasPrefix(s.comm, "sunk-slurm-node") {
			continue
		}
		for p := all[pid].ppid; p > 1; p = all[p].ppid {
			if p == self {
				ticks += s.ticks
				break
			}
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
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
