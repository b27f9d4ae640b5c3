package validation

import (
	"fmt"
	"maps"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"sunk.dev/sunk/pkg/slurmconf"
)

// Slurm config text from a custom resource is read with pkg/slurmconf, the reader the renderer
// uses too. Every key of a line is checked, not only its first: Slurm refuses a second key
// outside a record (checked too), but a check that stopped at the first would let a denied
// key ride behind an allowed one.

// maxConfLine bounds one line: Slurm's own parser stops at 1024 bytes a line, and a longer
// one would be cut silently.
const maxConfLine = 1024

// deniedSlurmConfKeys are the slurm.conf keys sunk sets for its own invariants; a line that
// sets one would open or break the cluster. The reason is quoted in the error.
var deniedSlurmConfKeys = map[string]string{
	"authtype":                       "authentication is sunk's (auth/slurm with the cluster's key)",
	"authalttypes":                   "authentication is sunk's (JWT for slurmrestd)",
	"authaltparameters":              "authentication is sunk's (the cluster's JWT key)",
	"authinfo":                       "authentication is sunk's",
	"credtype":                       "job credentials are sunk's (auth/slurm)",
	"jobcredentialprivatekey":        "job credentials are sunk's",
	"jobcredentialpubliccertificate": "job credentials are sunk's",
	"slurmuser":                      "the daemons' user is fixed by the image",
	"slurmduser":                     "slurmd must run as root to launch jobs",
	"slurmctldhost":                  "set from the controller pods",
	"controlmachine":                 "set from the controller pods",
	"controladdr":                    "set from the controller pods",
	"backupcontroller":               "set from the controller pods",
	"backupaddr":                     "set from the controller pods",
	"slurmctldaddr":                  "set from the controller pods",
	"slurmctldport":                  "the Services and probes use sunk's port",
	"slurmdport":                     "the Services and probes use sunk's port",
	"statesavelocation":              "the controller's state volume is mounted there",
	"slurmdspooldir":                 "the compute pods' spool volume is mounted there",
	"plugindir":                      "it decides which code the daemons load",
	"plugstackconfig":                "it decides which code the daemons load",
	"clustername":                    "accounting and the saved state are keyed by it",
	"slurmctldparameters":            "it carries enable_configless, which compute pods need to start, and on 26.05 conmgr_quiesce_timeout, without which a backup handing control back can hang",
	"accountingstoragetype":          "set from spec.accounting",
	"accountingstoragehost":          "set from spec.accounting",
	"accountingstorageport":          "set from spec.accounting",
	"accountingstoragepass":          "set from spec.accounting",
	"accountingstorageuser":          "set from spec.accounting",
	"accountingstorageexternalhost":  "set from spec.accounting",
	"accountingstoragebackuphost":    "set from spec.accounting",
	"accountingstorageloc":           "set from spec.accounting",
	"jobsubmitplugins":               "set from spec.jobSubmitLua",
	// Programs the daemons run, as SlurmUser in slurmctld's pod (where the state and the
	// cluster's keys are) or as root on the compute nodes: a path here runs code the image
	// did not ship with the keys in reach. Prolog and Epilog come from spec.prolog and
	// spec.epilog, whose scripts are checked.
	"prolog":                  "set from spec.prolog, whose scripts are checked",
	"epilog":                  "set from spec.epilog, whose scripts are checked",
	"prologslurmctld":         "it runs a program in slurmctld's pod, beside the cluster's keys",
	"epilogslurmctld":         "it runs a program in slurmctld's pod, beside the cluster's keys",
	"mailprog":                "it runs a program in slurmctld's pod, beside the cluster's keys",
	"resumeprogram":           "it runs a program in slurmctld's pod, beside the cluster's keys",
	"resumefailprogram":       "it runs a program in slurmctld's pod, beside the cluster's keys",
	"suspendprogram":          "it runs a program in slurmctld's pod, beside the cluster's keys",
	"slurmctldprimaryonprog":  "it runs a program in slurmctld's pod, beside the cluster's keys",
	"slurmctldprimaryoffprog": "it runs a program in slurmctld's pod, beside the cluster's keys",
	"rebootprogram":           "it runs a program as root on the compute nodes",
	"healthcheckprogram":      "it runs a program as root on the compute nodes",
	"unkillablestepprogram":   "it runs a program as root on the compute nodes",
	"jobcomptype":             "job completion plugins run programs (jobcomp/script) or send job records to a URL",
	"jobcomploc":              "job completion plugins run programs (jobcomp/script) or send job records to a URL",
	"tlstype":                 "the daemons' transport security is sunk's",
	"tlsparameters":           "the daemons' transport security is sunk's",
	"certmgrtype":             "the daemons' certificates are sunk's",
	"certmgrparameters":       "the daemons' certificates are sunk's",
	"slurmctldlogfile":        "sunk's daemons log to their container's output (kubectl logs); a path here is a file written by the daemon",
	"slurmdlogfile":           "sunk's daemons log to their container's output (kubectl logs); a path here is a file written as root",
	"slurmschedlogfile":       "sunk's daemons log to their container's output (kubectl logs); a path here is a file written by the daemon",
}

// DeniedSlurmConfKeys lists the slurm.conf keys that controller.extraConf may set only when
// listed in controller.unsafeConfKeys, each with the reason (lower case, for docs and tests).
func DeniedSlurmConfKeys() map[string]string { return maps.Clone(deniedSlurmConfKeys) }

// deniedPartitionParams are the parameters of a PartitionName line that sunk writes from the
// partition's own fields; a second copy in extraConf would make Slurm's choice, not the spec's.
var deniedPartitionParams = map[string]string{
	"partitionname": "it is spec.partitions[].name",
	"nodes":         "the nodes come from spec.partitions[].nodeSets",
	"default":       "it is spec.partitions[].default",
	"maxtime":       "it is spec.partitions[].maxTime",
	"state":         "sunk keeps the partition UP",
}

// confFile is what one Slurm config file accepts from a custom resource.
type confFile struct {
	name   string
	known  map[string]bool   // keys Slurm's parser knows, lower case
	denied map[string]string // lower-case key -> why sunk keeps it
}

var (
	slurmConf  = confFile{name: "slurm.conf", known: slurmConfKeys, denied: deniedSlurmConfKeys}
	cgroupConf = confFile{name: "cgroup.conf", known: cgroupConfKeys}
)

// validate checks config text line by line. unsafe lists keys the admin takes over knowingly
// (spec.controller.unsafeConfKeys): they pass the deny-list, with a warning.
func (f confFile) validate(text string, p *field.Path, unsafe map[string]bool) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	for i, line := range strings.Split(text, "\n") {
		lp := fmt.Sprintf("line %d", i+1)
		if err := lineProblem(line); err != "" {
			errs = append(errs, field.Invalid(p, lp, err))
			continue
		}
		parsed, err := slurmconf.Parse(line)
		if err != nil {
			errs = append(errs, field.Invalid(p, lp, err.Error()))
			continue
		}
		if err := parsed.Check(); err != nil {
			errs = append(errs, field.Invalid(p, lp, err.Error()))
		}
		// A record's parameters are not top-level keys: Slurm checks them per record.
		for _, t := range parsed.Settings() {
			k := strings.ToLower(t.Key)
			switch {
			case !f.known[k]:
				errs = append(errs, field.Invalid(p, lp, fmt.Sprintf("%s is not a %s key Slurm 24.11 knows: slurmctld would not start", t.Key, f.name)))
			case f.denied[k] != "" && !unsafe[k]:
				errs = append(errs, field.Forbidden(p, fmt.Sprintf("%s: %s sets %s, which sunk keeps: %s (an admin who must override it lists it in spec.controller.unsafeConfKeys)", lp, f.name, t.Key, f.denied[k])))
			case f.denied[k] != "":
				warnings = append(warnings, fmt.Sprintf("%s %s: %s overrides sunk's own setting (%s), allowed by spec.controller.unsafeConfKeys", p, lp, t.Key, f.denied[k]))
			}
		}
	}
	return errs, warnings
}

// validateParams checks the parameters appended to one rendered line (a partition's or a
// NodeSet's extraConf): one line of Key=Value tokens, each a parameter Slurm knows for that
// kind of line (known, from Slurm's own tables) and none that sunk writes itself from other
// fields (denied: key -> why), so that nothing else can ride along.
func validateParams(text string, p *field.Path, known map[string]bool, denied map[string]string, kind string) field.ErrorList {
	if err := lineProblem(text); err != "" {
		return field.ErrorList{field.Invalid(p, text, err)}
	}
	params, err := slurmconf.Parse(text)
	if err != nil {
		return field.ErrorList{field.Invalid(p, text, err.Error())}
	}
	var errs field.ErrorList
	for _, t := range params {
		k := strings.ToLower(t.Key)
		switch {
		case !known[k]:
			errs = append(errs, field.Invalid(p, text, fmt.Sprintf("%s is not a parameter of a %s line in Slurm 24.11", t.Key, kind)))
		case denied[k] != "":
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("%s: %s", t.Key, denied[k])))
		}
	}
	return errs
}

// lineProblem rejects what no Slurm config line may hold: control characters (a carriage
// return or NUL would be read differently by Slurm than by a person), non-ASCII characters
// (look-alikes), backslashes and overlong lines. Slurm's parser reads a backslash as an
// escape: "\#" is not a comment, so "MaxJobCount=5\# AuthType=auth/none" sets AuthType for
// Slurm while a reader (and a check) that stops at '#' sees none, and a backslash at the end
// of a line joins the next one to it. No value sunk accepts needs one.
func lineProblem(line string) string {
	if len(line) > maxConfLine {
		return fmt.Sprintf("longer than %d bytes: Slurm reads at most that much of a line", maxConfLine)
	}
	if strings.Contains(line, "\\") {
		return `contains a backslash: Slurm reads it as an escape ("\#" is not a comment) or, at the end of a line, as joining the next line`
	}
	for _, r := range line {
		if r != '\t' && unicode.IsControl(r) {
			return fmt.Sprintf("contains the control character %U", r)
		}
		if r > unicode.MaxASCII {
			return fmt.Sprintf("contains the non-ASCII character %q: Slurm's keys and values are ASCII", r)
		}
	}
	return ""
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}
