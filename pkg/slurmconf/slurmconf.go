// Package slurmconf reads a line of a Slurm config file (slurm.conf, cgroup.conf) into the
// Key=Value settings Slurm's own parser (src/common/parse_config.c) finds in it, so that the
// admission webhook, the renderer, restart detection and the API types agree on which keys a
// line sets. It imports the standard library only: api/v1alpha1 imports it, and the scheduler
// (its own Go module, pinned to other Kubernetes versions) imports that.
package slurmconf

import (
	"fmt"
	"regexp"
	"strings"
)

// Setting is one Key=Value of a line, the key as written (Slurm compares keys ignoring case).
type Setting struct{ Key, Value string }

// Line is the settings of one line in order; nil for a blank or comment line.
type Line []Setting

var (
	// keyPattern is a word. Slurm's parser also takes '_' and '.' in a key and an operator
	// before '=' ("Key+=Value"); no key sunk admits or writes has them, so a line with one
	// is refused rather than read by a second set of rules.
	keyPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	// spacedEquals: Slurm reads "Key = Value" as "Key=Value".
	spacedEquals = regexp.MustCompile(`\s*=\s*`)
)

// Parse reads one line: '#' starts a comment, "Key = Value" is "Key=Value", and each
// whitespace-separated token must be Key=Value. Slurm also reads a backslash as an escape
// (of '#', or of the newline) and a quoted value with spaces; this reader does neither, so
// text from a user with a backslash or a quote must be refused before it is read here
// (the webhook does).
func Parse(line string) (Line, error) {
	if i := strings.Index(line, "#"); i >= 0 {
		line = line[:i]
	}
	var out Line
	for _, f := range strings.Fields(spacedEquals.ReplaceAllString(line, "=")) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || !keyPattern.MatchString(k) {
			return nil, fmt.Errorf("%q is not Key=Value", f)
		}
		out = append(out, Setting{Key: k, Value: v})
	}
	return out, nil
}

// records are the keys that start a line describing one thing (a node, a partition...): the
// rest of the line is that thing's parameters, which Slurm reads with the record's own table
// (the S_P_ARRAY keys with a line handler in Slurm's read_config.c).
var records = map[string]bool{"nodename": true, "partitionname": true, "nodeset": true, "downnodes": true, "frontendname": true}

// Record reports a line whose first key names a record (NodeName=, PartitionName=, NodeSet=,
// DownNodes=, FrontendName=): its other keys are the record's parameters.
func (l Line) Record() bool { return len(l) > 0 && records[strings.ToLower(l[0].Key)] }

// Settings are what the line sets in the file itself: a record line's first key, any other
// line's every key. A second key outside a record is an error to Slurm (see Check), but
// whoever reads the line must still see it, or a key could hide behind another.
func (l Line) Settings() Line {
	if l.Record() {
		return l[:1]
	}
	return l
}

// Sets reports whether the line sets key in the file itself (Settings), ignoring case.
func (l Line) Sets(key string) bool {
	_, ok := l.Settings().Value(key)
	return ok
}

// Value is the value of key among the line's settings, ignoring case; the last one when the
// key is there twice, as Slurm keeps the latest.
func (l Line) Value(key string) (value string, ok bool) {
	for _, s := range l {
		if strings.EqualFold(s.Key, key) {
			value, ok = s.Value, true
		}
	}
	return value, ok
}

// Check reports what Slurm refuses in a line it can read: outside a record, Slurm reads one
// Key=Value a line and stops the daemon with "Parse error in file ... line ..." at anything
// after it (s_p_parse_file checks that only whitespace is left).
func (l Line) Check() error {
	if !l.Record() && len(l) > 1 {
		return fmt.Errorf("%s=%s and %s= on one line: Slurm reads one key a line (only NodeName=, PartitionName=, NodeSet=, DownNodes= and FrontendName= lines take parameters) and stops at the rest with a parse error",
			l[0].Key, l[0].Value, l[1].Key)
	}
	return nil
}
