package render

import (
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/slurmconf"
)

func TestMergeConf(t *testing.T) {
	defaults := "ClusterName=c\nSelectTypeParameters=CR_Core_Memory\nMessageTimeout=10\nSlurmctldHost=a\n"
	for _, c := range []struct {
		name, extra, want string
	}{
		{"no extra", "", defaults},
		{"an extra line replaces the default of its key, in any case and spacing", "messagetimeout = 30",
			"ClusterName=c\nSelectTypeParameters=CR_Core_Memory\nSlurmctldHost=a\n# spec extra lines\nmessagetimeout = 30\n"},
		{"two keys on a line: both defaults go", "MessageTimeout=30 SelectTypeParameters=CR_CPU",
			"ClusterName=c\nSlurmctldHost=a\n# spec extra lines\nMessageTimeout=30 SelectTypeParameters=CR_CPU\n"},
		{"a comment sets nothing", "# MessageTimeout=30\nMinJobAge=5 # SelectTypeParameters=CR_CPU",
			"ClusterName=c\nSelectTypeParameters=CR_Core_Memory\nMessageTimeout=10\nSlurmctldHost=a\n# spec extra lines\n# MessageTimeout=30\nMinJobAge=5 # SelectTypeParameters=CR_CPU\n"},
		{"a key several lines may set adds to the default", "SlurmctldHost=b",
			defaults + "# spec extra lines\nSlurmctldHost=b\n"},
		{"a record's parameters are not top-level keys", "NodeName=n MessageTimeout=30",
			defaults + "# spec extra lines\nNodeName=n MessageTimeout=30\n"},
	} {
		if got := mergeConf(defaults, c.extra); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

func TestRestartSettings(t *testing.T) {
	for _, c := range []struct {
		name, conf, want string
	}{
		{"restart-only lines as written, sorted", "MessageTimeout=10\nSlurmctldPort=6817\n  ClusterName = c  \n", "ClusterName = c\nSlurmctldPort=6817"},
		{"a restart key behind another on a line", "MessageTimeout=30 SelectTypeParameters=CR_CPU\n", "MessageTimeout=30 SelectTypeParameters=CR_CPU"},
		{"a restart key in a comment", "MessageTimeout=30 # SelectTypeParameters=CR_CPU\n", ""},
		{"a record's parameters", "NodeName=n TreeWidth=3\n", ""},
	} {
		if got := restartSettings(c.conf); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestRenderedLinesSlurmReads: every line sunk renders into slurm.conf and cgroup.conf is one
// slurmconf reads and Slurm accepts, so that merging and restart detection see all its keys.
func TestRenderedLinesSlurmReads(t *testing.T) {
	for name, c := range map[string]struct {
		sc *sunkv1.SlurmCluster
		in ConfigInputs
	}{
		"minimal": {minimal(), ConfigInputs{Names: clusternames.For(minimal(), "")}},
		"full":    {full(), fullInputs(full())},
	} {
		cfg, err := RenderConfig(c.sc, c.in)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{"slurm.conf", "cgroup.conf"} {
			for i, l := range strings.Split(cfg.Files[file], "\n") {
				parsed, err := slurmconf.Parse(l)
				if err == nil {
					err = parsed.Check()
				}
				if err != nil {
					t.Errorf("%s %s line %d %q: %v", name, file, i+1, l, err)
				}
			}
		}
	}
}
