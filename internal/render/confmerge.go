package render

import (
	"sort"
	"strings"
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
// dropped, so that the admin's line wins instead of Slurm seeing the key twice.
func mergeConf(defaults, extra string) string {
	extraKeys := map[string]bool{}
	var extraLines []string
	for _, l := range strings.Split(extra, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		extraLines = append(extraLines, l)
		if k := confKey(l); k != "" {
			extraKeys[k] = true
		}
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(defaults, "\n"), "\n") {
		if k := confKey(l); k != "" && extraKeys[k] && !multiValued[k] {
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

func confKey(line string) string {
	if strings.HasPrefix(line, "#") {
		return ""
	}
	k, _, ok := strings.Cut(line, "=")
	if !ok {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(k))
}

// restartSettings is the canonical form of the restart-only settings of a slurm.conf.
func restartSettings(conf string) string {
	var kv []string
	for _, l := range strings.Split(conf, "\n") {
		if k := confKey(strings.TrimSpace(l)); restartKeys[k] {
			kv = append(kv, strings.TrimSpace(l))
		}
	}
	sort.Strings(kv)
	return strings.Join(kv, "\n")
}
