package container

import (
	"fmt"
	"path"
	"strings"
)

// ParseJobArgs reads remove-job's flags (the job's epilog): --job-id, and the node's settings
// the plugin passes to every command, of which only --state-dir matters here.
func ParseJobArgs(argv []string) (jobID uint64, stateDir string, err error) {
	stateDir = DefaultStateDir
	haveJob := false
	for _, arg := range argv {
		name, val, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		switch {
		case !strings.HasPrefix(arg, "--"):
			return 0, "", fmt.Errorf("unexpected argument %q", arg)
		case name == "job-id":
			if jobID, err = parseUint(name, val, 64); err != nil {
				return 0, "", err
			}
			haveJob = true
		case name == "state-dir":
			if !path.IsAbs(val) {
				return 0, "", ferr(name, "%q is not an absolute path", val)
			}
			stateDir = path.Clean(val)
		case name == "cache-dir" || name == "insecure-registry" || name == "cache-max" || name == "auth-dir" || name == "driver-root" || name == "spool-dir":
		default:
			return 0, "", fmt.Errorf("unknown flag --%s", name)
		}
	}
	if !haveJob {
		return 0, "", fmt.Errorf("--job-id is required")
	}
	return jobID, stateDir, nil
}
