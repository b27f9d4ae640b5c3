package slurm

import (
	"errors"
	"testing"
)

// TestRefusalKinds: how an immediate allocation's refusal reads, by Slurm's error number.
func TestRefusalKinds(t *testing.T) {
	for _, tc := range []struct {
		codes                       []int
		notNow, busy, unsatisfiable bool
	}{
		{[]int{2016}, true, true, false},
		{[]int{2013}, true, false, false},
		{[]int{2016, 2013}, true, false, false},
		{[]int{2014}, false, false, true},
		{[]int{2015}, false, false, true},
		{[]int{1001}, false, false, false},
	} {
		var errs []ErrorDetail
		for _, c := range tc.codes {
			errs = append(errs, ErrorDetail{Code: c})
		}
		err := classify("POST /job/allocate", 500, errs, nil, false)
		if NotNow(err) != tc.notNow || Busy(err) != tc.busy || Unsatisfiable(err) != tc.unsatisfiable {
			t.Errorf("codes %v: NotNow %v Busy %v Unsatisfiable %v, want %v %v %v", tc.codes,
				NotNow(err), Busy(err), Unsatisfiable(err), tc.notNow, tc.busy, tc.unsatisfiable)
		}
	}
}

// TestNotDelivered: only a failure to connect to slurmctld says the request never reached it.
func TestNotDelivered(t *testing.T) {
	for _, tc := range []struct {
		code int
		want bool
	}{
		{1800, true},                                // SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR
		{1001, true},                                // SLURM_COMMUNICATIONS_CONNECTION_ERROR
		{1801, false}, {1802, false}, {1003, false}, // send, receive: it may have arrived
		{2016, false},
	} {
		err := classify("PUT /reconfigure", 502, []ErrorDetail{{Code: tc.code}}, nil, false)
		if got := NotDelivered(err); got != tc.want {
			t.Errorf("error %d: NotDelivered %v, want %v", tc.code, got, tc.want)
		}
	}
	if NotDelivered(errors.New("dial tcp: connection refused")) {
		t.Error("an error that is not slurmrestd's answer: NotDelivered")
	}
}
