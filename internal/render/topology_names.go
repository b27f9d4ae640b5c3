package render

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
)

// topologyNames gives each switch or block (by identity) a name slurmctld reads safely from
// its label value:
//   - only letters, digits, '_', '-' and '.', so that no value can add a key, a comment or
//     a hostlist bracket or comma to the line (anything else becomes '_');
//   - never ending in a digit: Slurm reads a child switch list as a hostlist, and a name
//     ending in a long digit run is parsed as a number that overflows and stops slurmctld,
//     so such a name gets the suffix (tree "-sw", block "-blk");
//   - at most maxTopologyName characters;
//   - unique and never "unknown": slurmctld stops on a switch or block defined twice, so
//     names that would collide (two values sanitised alike, one value under two parents)
//     all end in a hash of their identity, in letters only.
func topologyNames(values map[string]string, suffix string) (map[string]string, error) {
	base := map[string]string{}
	count := map[string]int{UnknownTopologyName: 1}
	for id, v := range values {
		n := sanitiseTopologyName(v, suffix)
		base[id] = n
		count[n]++
	}
	out := map[string]string{}
	used := map[string]bool{UnknownTopologyName: true}
	for id, n := range base {
		if count[n] > 1 {
			n = strings.TrimRight(n[:min(len(n), maxTopologyName-7)], "-") + "-" + letterHash(id)
		}
		out[id] = n
	}
	for id, n := range out {
		if used[n] {
			return nil, fmt.Errorf("topology: two switches or blocks would both be named %q (%q)", n, values[id])
		}
		used[n] = true
	}
	return out, nil
}

func sanitiseTopologyName(v, suffix string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if len(n) > maxTopologyName-len(suffix)-1 {
		n = n[:maxTopologyName-len(suffix)-1]
	}
	if n == "" || !isAlnum(n[0]) {
		n = "x" + n // a name starts plainly, never with '-' or '.'
	}
	if n[len(n)-1] >= '0' && n[len(n)-1] <= '9' {
		n += suffix
	}
	return n
}

// letterHash is six lowercase letters from a hash of s: a suffix that cannot end in a digit.
func letterHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	b := make([]byte, 6)
	for i := range b {
		b[i] = 'a' + sum[i]%26
	}
	return string(b)
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// renamed lists the values whose name is more than the value itself (with the suffix for a
// trailing digit): characters replaced, cut, or a hash against a collision. The condition
// reports them, so that an admin can find a switch by its label value.
func renamed(values, names map[string]string, suffix string) []string {
	var out []string
	for id, v := range values {
		if n := names[id]; n != v && n != v+suffix {
			out = append(out, fmt.Sprintf("%q as %s", v, n))
		}
	}
	sort.Strings(out)
	return out
}
