package container

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrNotEnabled: the node's settings file (--node-conf) does not exist. plugstack.conf is one
// file for a whole configless cluster, so every node loads the plugin once any NodeSet enables
// containers; only the pods of such a NodeSet get the file (docs/containers.md).
var ErrNotEnabled = errors.New("containers are not enabled on this node")

// nodeConfFlags are the flags a node's settings file may hold: the node's, never a step's.
var nodeConfFlags = map[string]bool{"state-dir": true, "cache-dir": true, "insecure-registry": true, "cache-max": true, "auth-dir": true, "driver-root": true, "spool-dir": true}

// ParseNodeConf reads a node's settings file: one --flag=value a line (state-dir, cache-dir,
// insecure-registry, cache-max, auth-dir, driver-root, spool-dir), blank lines and '#' comments ignored.
func ParseNodeConf(text string) ([]string, error) {
	var flags []string
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "--"), "=")
		if !strings.HasPrefix(line, "--") || !nodeConfFlags[name] {
			return nil, fmt.Errorf("line %d: %q is not a node setting (--state-dir, --cache-dir, --insecure-registry, --cache-max, --auth-dir, --driver-root, --spool-dir)", i+1, line)
		}
		flags = append(flags, line)
	}
	return flags, nil
}

// ExpandNodeConf replaces each --node-conf=FILE of argv (the plugin's arg= from plugstack.conf)
// with the flags FILE holds. A missing FILE is ErrNotEnabled.
func ExpandNodeConf(argv []string) ([]string, error) {
	var out []string
	for _, arg := range argv {
		file, ok := strings.CutPrefix(arg, "--node-conf=")
		if !ok {
			out = append(out, arg)
			continue
		}
		b, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNotEnabled
		}
		if err != nil {
			return nil, fmt.Errorf("--node-conf: %v", err)
		}
		flags, err := ParseNodeConf(string(b))
		if err != nil {
			return nil, fmt.Errorf("--node-conf: %s: %v", file, err)
		}
		out = append(out, flags...)
	}
	return out, nil
}
