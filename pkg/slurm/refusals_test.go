package slurm

import "testing"

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
