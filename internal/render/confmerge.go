package render

import (
	"slices"
	"sort"
	"strings"

	"sunk.dev/sunk/pkg/slurmconf"
)

// restartKeys are slurm.conf keys that slurmctld only reads at start (listening sockets,
// authentication, state location, plugin choices), compared case-insensitively.
var restartKeys = map[string]bool{
	"clustername": true, "slurmctldhost": true, "slurmctldport": true, "slurmdport": true,
	"slurmuser": true, "authtype": true, "authalttypes": true, "authaltparameters": true,
	"credtype": true, "statesavelocation": true, "selecttype": true, "selecttypeparameters": true,
	"plugindir": true, "switchtype": true, "proctracktype": true, "taskplugin": true,
	"accountingstoragetype": true, "accountingstoragehost": true, "accountingstorageport": true,
	"slurmctldparameters": true, "maxnodecount": true, "treewidth": true, "grestypes": true,
}

// mergeConf appends extra lines to defaults; a default whose key an extra line sets is
// dropped, so that the admin's line wins instead of Slurm seeing the key twice. Every key of
// an extra line counts, not only its first: admission refuses a second key outside a record,
// but text that reached the renderer without admission must not leave a default beside it.
func mergeConf(defaults, extra string) string {
	extraKeys := map[string]bool{}
	var extraLines []string
	for _, l := range strings.Split(extra, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		extraLines = append(extraLines, l)
		for _, k := range confKeys(l) {
			extraKeys[k] = true
		}
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(defaults, "\n"), "\n") {
		if slices.ContainsFunc(confKeys(l), func(k string) bool { return extraKeys[k] && !multiValued[k] }) {
			continue
		}
		out = append(out, l)
	}
	if len(extraLines) > 0 {
		out = append(out, "# spec extra lines")
		out = append(out, extraLines...)
	}
	return strings.Join(out, "\n") + "\n"
}

// multiValued keys may appear several times; an extra line adds to them.
var multiValued = map[string]bool{"slurmctldhost": true, "nodename": true, "partitionname": true, "nodeset": true, "include": true}

// confKeys are the keys, lower case, that a line sets in the file (a record line: its first);
// none for a line slurmconf cannot read, which admission refuses and sunk does not write.
func confKeys(line string) []string {
	parsed, _ := slurmconf.Parse(line)
	var keys []string
	for _, s := range parsed.Settings() {
		keys = append(keys, strings.ToLower(s.Key))
	}
	return keys
}

// restartSettings is the canonical form of the restart-only settings of a slurm.conf: each
// line that sets a restart key, as written, so that the hash of a cluster's settings stays
// what earlier versions computed and an upgrade of the operator restarts no slurmctld.
func restartSettings(conf string) string {
	var kv []string
	for _, l := range strings.Split(conf, "\n") {
		l = strings.TrimSpace(l)
		if slices.ContainsFunc(confKeys(l), func(k string) bool { return restartKeys[k] }) {
			kv = append(kv, l)
		}
	}
	sort.Strings(kv)
	return strings.Join(kv, "\n")
}
