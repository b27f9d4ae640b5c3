package slurm

import "strings"

// ConstraintAdmits reports whether a node whose features has reports could be one of the nodes
// of a job with this --constraint expression (a job record's Features), as slurmctld reads it
// (src/slurmctld/job_scheduler.c, _feature_string2list; node_scheduler.c, _match_feature):
//
//   - left to right, without precedence: a&b|c is (a&b)|c; parentheses group;
//   - a comma is an &;
//   - [a|b] (every node the same one) admits a node with a or with b;
//   - inside brackets an & joins sets of different nodes ([rack1*2&rack2*4]), and so does an &
//     beside a count outside them ((knl&flat)*4&haswell*2): a node needs only one side.
//
// An empty expression admits every node; so does one it cannot read, which slurmctld, having
// accepted the job, reads in some way this function does not know.
func ConstraintAdmits(expr string, has func(feature string) bool) bool {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return true
	}
	p := constraintReader{s: strings.ReplaceAll(expr, ",", "&"), has: has}
	v, _, ok := p.sequence(false)
	if !ok || p.i != len(p.s) {
		return true
	}
	return v
}

type constraintReader struct {
	s   string
	i   int
	has func(string) bool
}

// sequence reads operands joined by & and | up to a closing bracket or the end; counted says
// whether one carried a count (*N).
func (p *constraintReader) sequence(inBrackets bool) (v, counted, ok bool) {
	v, counted, ok = p.operand()
	for ok && p.i < len(p.s) && (p.s[p.i] == '&' || p.s[p.i] == '|') {
		op := p.s[p.i]
		p.i++
		w, c, wok := p.operand()
		if !wok {
			return false, false, false
		}
		if op == '|' || inBrackets || counted || c {
			v = v || w // either side may be this node's
		} else {
			v = v && w
		}
		counted = counted || c
	}
	return v, counted, ok
}

// operand reads a feature name or a bracketed sequence, with its count if any.
func (p *constraintReader) operand() (v, counted, ok bool) {
	if p.i >= len(p.s) {
		return false, false, false
	}
	switch open := p.s[p.i]; open {
	case '(', '[':
		closer := byte(')')
		if open == '[' {
			closer = ']'
		}
		p.i++
		v, counted, ok = p.sequence(open == '[')
		if !ok || p.i >= len(p.s) || p.s[p.i] != closer {
			return false, false, false
		}
		p.i++
	default:
		start := p.i
		for p.i < len(p.s) && !strings.ContainsRune("&|()[]*", rune(p.s[p.i])) {
			p.i++
		}
		name := strings.TrimSpace(p.s[start:p.i])
		if name == "" {
			return false, false, false
		}
		v = p.has(name)
	}
	if p.i < len(p.s) && p.s[p.i] == '*' {
		p.i++
		start := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		if p.i == start {
			return false, false, false
		}
		counted = true
	}
	return v, counted, true
}
