//go:build integration

package operator

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/test/privateslurm"
)

// privateSlurm is a slurmctld, a slurmrestd and dynamic slurmd of their own
// (test/privateslurm): a topology and its reconfigures would change how the shared test bed
// places every other test's jobs. The test writes etc/topology.yaml from the operator's
// ConfigMap, as kubelet would (WriteEtc). (test/integration/slurm runs the same daemons
// without REST.)
type privateSlurm struct {
	*privateslurm.Slurm
	restURL string
	jwtKey  []byte
}

// startPrivateSlurm starts slurmctld with topologyYAML and slurmrestd, then a dynamic slurmd
// (slurmd -Z, as a compute pod's) per node, and waits until they are idle.
func startPrivateSlurm(t *testing.T, topologyYAML string, nodes []string) *privateSlurm {
	t.Helper()
	p := &privateSlurm{Slurm: privateslurm.New(t), jwtKey: make([]byte, 32)}
	_, _ = rand.Read(p.jwtKey)
	must(t, os.WriteFile(filepath.Join(p.Dir, "etc", "jwt.key"), p.jwtKey, 0o600))
	ports := privateslurm.FreePorts(t, 2+len(nodes))
	for i, n := range nodes {
		p.AddHost(t, n, fmt.Sprintf("127.0.0.%d", 10+i))
		p.NodeSpool(t, n)
	}
	p.WriteEtc(t, "slurm.conf", p.Conf("privtest")+fmt.Sprintf(`SlurmctldPort=%d
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
MaxNodeCount=8
PartitionName=all Nodes=ALL Default=YES State=UP
`, ports[0]))
	p.WriteEtc(t, render.TopologyYAMLFile, topologyYAML)
	p.StartCtld(t)
	p.restURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p.Start(t, "privrestd", "env", "SLURM_JWT=daemon", "slurmrestd", "-u", "slurmrestd", "-g", "slurmrestd",
		"-a", "rest_auth/jwt", "-s", "openapi/slurmctld", strings.TrimPrefix(p.restURL, "http://"))
	for i, n := range nodes {
		p.Start(t, n, "slurmd", "-D", "-Z", "--conf", fmt.Sprintf("CPUs=1 RealMemory=100 Port=%d", ports[2+i]))
	}
	p.WaitIdle(t, len(nodes))
	return p
}

// client is a REST client of slurmrestd, as root, in the newest data version.
func (p *privateSlurm) client(t *testing.T) slurm.Client {
	t.Helper()
	src, err := slurm.NewJWTSource("root", p.jwtKey, slurm.WithLifetime(time.Hour))
	must(t, err)
	c, err := slurm.New(slurm.Config{URL: p.restURL, APIVersion: slurm.Versions()[len(slurm.Versions())-1], Tokens: src})
	must(t, err)
	return c
}
