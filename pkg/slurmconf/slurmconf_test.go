package slurmconf

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		line     string
		want     Line
		settings []string // the keys of Settings
		record   bool
		check    string // what Check says, "" for nothing
		err      string
	}{
		{line: "", want: nil},
		{line: "   # a comment", want: nil},
		{line: "MinJobAge=600", want: Line{{"MinJobAge", "600"}}, settings: []string{"MinJobAge"}},
		{line: "  SlurmUser = root  # spaces around =", want: Line{{"SlurmUser", "root"}}, settings: []string{"SlurmUser"}},
		{line: "SchedulerParameters=bf_interval=60,bf_continue", want: Line{{"SchedulerParameters", "bf_interval=60,bf_continue"}}, settings: []string{"SchedulerParameters"}},
		{line: "Key=", want: Line{{"Key", ""}}, settings: []string{"Key"}},
		{line: "MessageTimeout=30 SelectTypeParameters=CR_CPU", want: Line{{"MessageTimeout", "30"}, {"SelectTypeParameters", "CR_CPU"}},
			settings: []string{"MessageTimeout", "SelectTypeParameters"}, check: "Slurm reads one key a line"},
		{line: "NodeName=static-1 CPUs=4 State=CLOUD", want: Line{{"NodeName", "static-1"}, {"CPUs", "4"}, {"State", "CLOUD"}},
			settings: []string{"NodeName"}, record: true},
		{line: "partitionname = p Nodes=ALL # x=y", want: Line{{"partitionname", "p"}, {"Nodes", "ALL"}}, settings: []string{"partitionname"}, record: true},
		{line: "Include /etc/slurm/x.conf", err: `"Include" is not Key=Value`},
		{line: "Key+=1", err: `"Key+=1" is not Key=Value`},
		{line: "=1", err: `"=1" is not Key=Value`},
	} {
		got, err := Parse(c.line)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.line, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %#v %v, want %#v", c.line, got, err, c.want)
			continue
		}
		var keys []string
		for _, s := range got.Settings() {
			keys = append(keys, s.Key)
		}
		if !reflect.DeepEqual(keys, c.settings) || got.Record() != c.record {
			t.Errorf("%q: settings %v record %v, want %v %v", c.line, keys, got.Record(), c.settings, c.record)
		}
		if err := got.Check(); (c.check == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.check) {
			t.Errorf("%q: Check %v, want %q", c.line, err, c.check)
		}
	}
}

func TestSetsAndValue(t *testing.T) {
	l, _ := Parse("OverSubscribe=NO prioritytier=7 PriorityTier=8")
	if v, ok := l.Value("PriorityTier"); !ok || v != "8" {
		t.Errorf("Value = %q %v, want the last, 8", v, ok)
	}
	if !l.Sets("PRIORITYTIER") || l.Sets("MaxTime") {
		t.Error("Sets must see every key of a line outside a record, ignoring case, and no other")
	}
	n, _ := Parse("NodeName=x CPUs=4")
	if n.Sets("CPUs") || !n.Sets("nodename") {
		t.Error("a record line sets its first key only: the rest are the record's parameters")
	}
	if v, ok := n.Value("cpus"); !ok || v != "4" {
		t.Errorf("Value reads a record's parameters too: %q %v", v, ok)
	}
}
