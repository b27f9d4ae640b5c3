package slurmcluster

import (
	"errors"
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/slurm"
)

// TestControllerCondition: ControllerReady is True while some slurmctld serves, and names the
// backup when it is the one; a backup that answers pings but refuses work does not count.
func TestControllerCondition(t *testing.T) {
	base := controllerView{Primary: "c-0", Backup: "c-1", PrimaryProblem: "slurmctld pod does not exist yet"}
	with := func(f func(*controllerView)) controllerView { v := base; f(&v); return v }
	standby := errors.New("slurmrestd: Slurm error 1020")
	for _, c := range []struct {
		name   string
		v      controllerView
		ok     bool
		reason string
		inMsg  string
	}{
		{"primary ready", with(func(v *controllerView) { v.PrimaryReady, v.HasBackup = true, true }), true, sunkv1.ReasonReady, "answers on c-0"},
		{"no backup", base, false, sunkv1.ReasonNotReady, "does not exist"},
		{"backup not ready", with(func(v *controllerView) { v.HasBackup = true }), false, sunkv1.ReasonPrimaryDown, "c-1 is not ready"},
		{"slurmrestd not ready", with(func(v *controllerView) { v.HasBackup, v.BackupReady = true, true }), false, sunkv1.ReasonPrimaryDown, "not known yet"},
		{"backup in standby", with(func(v *controllerView) { v.HasBackup, v.BackupReady, v.Asked, v.ServeErr = true, true, true, standby }), false, sunkv1.ReasonPrimaryDown, "Slurm error 1020"},
		{"backup serves", with(func(v *controllerView) { v.HasBackup, v.BackupReady, v.Asked = true, true, true }), true, sunkv1.ReasonBackupInCharge, "the backup slurmctld c-1 serves; the primary c-0 is down"},
		{"primary answers with its pod not ready", with(func(v *controllerView) {
			v.HasBackup, v.BackupReady, v.Asked, v.PrimaryResponds = true, true, true, true
		}), true, sunkv1.ReasonReady, "answers on c-0"},
	} {
		ok, reason, msg := controllerCondition(c.v)
		if ok != c.ok || reason != c.reason || !strings.Contains(msg, c.inMsg) {
			t.Errorf("%s: got %v %s %q, want %v %s containing %q", c.name, ok, reason, msg, c.ok, c.reason, c.inMsg)
		}
	}
	if primaryResponds([]slurm.ControllerPing{{Hostname: "c-1", Responding: true}, {Hostname: "c-0", Primary: true}}) {
		t.Error("primaryResponds read the backup's answer")
	}
	if !primaryResponds([]slurm.ControllerPing{{Hostname: "c-0", Primary: true, Responding: true}}) {
		t.Error("primaryResponds missed the primary's answer")
	}
}
