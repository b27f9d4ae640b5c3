package clustertls

import (
	"strings"
	"testing"
	"time"
)

var names = []string{"c1-restapi", "c1-restapi.ns", "c1-restapi.ns.svc", "c1-restapi.ns.svc.cluster.local"}

// secretAt is a Secret's data issued at t for names.
func secretAt(t *testing.T, at time.Time, names []string) map[string][]byte {
	t.Helper()
	d, err := Renewed("c1", nil, Decision{NewCA: true}, names, at)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func with(d map[string][]byte, k string, v []byte) map[string][]byte {
	out := map[string][]byte{}
	for kk, vv := range d {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fresh := secretAt(t, t0, names)
	other := secretAt(t, t0, names)
	// The serving certificate of another CA, with the first CA.
	foreignCert := with(with(fresh, CertKey, other[CertKey]), KeyKey, other[KeyKey])
	// A CA issued 7 years ago (past 2/3 of 10) with a serving certificate issued today.
	oldCA, err := Renewed("c1", secretAt(t, t0.AddDate(-7, 0, 0), names), Decision{NewCert: true}, names, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		data          map[string][]byte
		names         []string
		now           time.Time
		newCA, newCrt bool
		reason        string
	}{
		{name: "no secret", data: nil, names: names, now: t0, newCA: true, newCrt: true, reason: "the cluster has none yet"},
		{name: "fresh", data: fresh, names: names, now: t0},
		{name: "names in another order", data: fresh, names: []string{names[3], names[1], names[2], names[0]}, now: t0},
		{name: "just before 2/3 of a year", data: fresh, names: names, now: t0.Add(243 * 24 * time.Hour)},
		{name: "past 2/3 of a year", data: fresh, names: names, now: t0.Add(244 * 24 * time.Hour), newCrt: true, reason: "serving certificate expires"},
		{name: "expired", data: fresh, names: names, now: t0.AddDate(2, 0, 0), newCrt: true, reason: "serving certificate expires"},
		{name: "CA past 2/3 of its life", data: oldCA, names: names, now: t0, newCA: true, newCrt: true, reason: "the CA expires"},
		{name: "a name added", data: fresh, names: append(names, "c1-nodewatch"), now: t0, newCrt: true, reason: "clients use"},
		{name: "a name gone", data: fresh, names: names[:3], now: t0, newCrt: true, reason: "clients use"},
		{name: "another CA's certificate", data: foreignCert, names: names, now: t0, newCrt: true, reason: "does not sign"},
		{name: "no serving key", data: with(fresh, KeyKey, nil), names: names, now: t0, newCrt: true, reason: "no usable serving certificate"},
		{name: "a serving key of another certificate", data: with(fresh, KeyKey, other[KeyKey]), names: names, now: t0, newCrt: true, reason: "is not the key"},
		{name: "no CA key", data: with(fresh, CAKeyKey, nil), names: names, now: t0, newCA: true, newCrt: true, reason: "no usable CA"},
		{name: "a CA key of another CA", data: with(fresh, CAKeyKey, other[CAKeyKey]), names: names, now: t0, newCA: true, newCrt: true, reason: "is not the key"},
		{name: "garbage CA", data: with(fresh, CACertKey, []byte("not PEM")), names: names, now: t0, newCA: true, newCrt: true, reason: "no usable CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.data, tc.names, tc.now)
			if d.NewCA != tc.newCA || d.NewCert != tc.newCrt || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("Decide = %+v, want NewCA %v NewCert %v, a reason with %q", d, tc.newCA, tc.newCrt, tc.reason)
			}
			if !d.NewCA && !d.NewCert && (d.RenewAt.IsZero() || !d.RenewAt.After(tc.now)) {
				t.Fatalf("RenewAt %s, want after %s", d.RenewAt, tc.now)
			}
			if !d.NewCA && !d.NewCert {
				return
			}
			// What the decision asks for settles it.
			after, err := Renewed("c1", tc.data, d, tc.names, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if again := Decide(after, tc.names, tc.now); again.NewCA || again.NewCert {
				t.Fatalf("after renewing: %+v", again)
			}
		})
	}
}

// A new CA keeps the one it replaces in the bundle while it is valid: servers still present
// its certificate until kubelet refreshes their volume.
func TestNewCAKeepsTheOldOneTrusted(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := secretAt(t, t0, names)
	now := t0.AddDate(7, 0, 0)
	renewed, err := Renewed("c1", old, Decide(old, names, now), names, now)
	if err != nil {
		t.Fatal(err)
	}
	certs, err := parseCerts(renewed[CACertKey])
	if err != nil || len(certs) != 2 {
		t.Fatalf("CA bundle: %d certificates, %v; want the new and the old", len(certs), err)
	}
	oldCA, _ := parseCerts(old[CACertKey])
	if !certs[1].Equal(oldCA[0]) {
		t.Fatal("the second certificate is not the old CA")
	}
	// Once the old CA has expired it is dropped.
	later := t0.AddDate(11, 0, 0)
	renewed2, err := Renewed("c1", renewed, Decision{NewCA: true}, names, later)
	if err != nil {
		t.Fatal(err)
	}
	if certs, _ := parseCerts(renewed2[CACertKey]); len(certs) != 2 || certs[1].Equal(oldCA[0]) {
		t.Fatalf("bundle after another CA: %d certificates, want the new and the one before it", len(certs))
	}
}
