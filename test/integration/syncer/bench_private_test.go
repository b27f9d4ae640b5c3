//go:build integration

package syncer_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sunk.dev/sunk/test/privateslurm"
	"sunk.dev/sunk/test/testenv"
)

// privateBench is a Slurm of the benchmark's own (SUNK_BENCH_PRIVATE=1): the shared test bed
// holds at most 6,000 node records (its MaxNodeCount) and serves other tests meanwhile, whose
// RPCs sdiag would count. It runs slurmctld with room for maxNodes records and the shared bed's
// timing settings, slurmrestd, and one dynamic slurmd (a real node, so that slurmctld pings and
// bumps its node table's timestamp as on the bed), and describes itself as a test bed.
func privateBench(b *testing.B, bed *testenv.SlurmEnv, maxNodes int) *testenv.SlurmEnv {
	b.Helper()
	p := privateslurm.New(b)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(p.Dir, "etc", "jwt.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		b.Fatal(err)
	}
	ports := privateslurm.FreePorts(b, 3)
	p.AddHost(b, "pnode-1", "127.0.0.10")
	p.NodeSpool(b, "pnode-1")
	p.WriteEtc(b, "slurm.conf", p.Conf("privbench")+fmt.Sprintf(`SlurmctldPort=%d
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
MaxNodeCount=%d
SlurmdTimeout=300
ReturnToService=2
MessageTimeout=10
TCPTimeout=5
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000,sched_interval=10,bf_continue,bf_interval=10,bf_max_job_test=1000,max_rpc_cnt=150
PartitionName=all Nodes=ALL Default=YES State=UP
`, ports[0], maxNodes+10))
	p.StartCtld(b)
	rest := fmt.Sprintf("127.0.0.1:%d", ports[1])
	p.Start(b, "privrestd", "env", "SLURM_JWT=daemon", "slurmrestd", "-u", "slurmrestd", "-g", "slurmrestd",
		"-a", "rest_auth/jwt", "-s", "openapi/slurmctld", rest)
	p.Start(b, "pnode-1", "slurmd", "-D", "-Z", "--conf", fmt.Sprintf("CPUs=1 RealMemory=100 Port=%d", ports[2]))
	p.WaitIdle(b, 1)
	return &testenv.SlurmEnv{SlurmVersion: bed.SlurmVersion, RESTURL: "http://" + rest, JWTKeyFile: keyFile, User: "root",
		Nodes: []string{"pnode-1"}, SharedDir: filepath.Join(p.Dir, "shared"), ClusterName: "privbench",
		ExecCommand: p.Command(privateslurm.CtldHost)}
}

// benchEnv is the Slurm BenchmarkSyncer runs against: the shared test bed, or with
// SUNK_BENCH_PRIVATE=1 a private one sized for the largest of sizes.
func benchEnv(b *testing.B, sizes []int) *testenv.SlurmEnv {
	bed := testenv.Slurm(b)
	if strings.TrimSpace(os.Getenv("SUNK_BENCH_PRIVATE")) != "1" {
		return bed
	}
	largest := 0
	for _, n := range sizes {
		largest = max(largest, n)
	}
	return privateBench(b, bed, largest)
}
