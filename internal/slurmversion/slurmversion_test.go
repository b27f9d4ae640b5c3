package slurmversion

import (
	"strings"
	"testing"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

func TestParseImages(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    Images
	}{
		{in: DefaultImagesFlag, want: Images{"24.11": "sunk.dev/slurm:24.11-local", "26.05": "sunk.dev/slurm:26.05-local"}},
		{in: " 26.05=x:1 ", want: Images{"26.05": "x:1"}},
		{in: "", want: Images{}},
		{in: "25.11=x", err: `release "25.11" is not one of 24.11, 26.05`},
		{in: "26.05", err: `"26.05" is not RELEASE=IMAGE`},
		{in: "26.05=", err: `"26.05=" is not RELEASE=IMAGE`},
	} {
		got, err := ParseImages(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseImages(%q) = %v, want error %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("ParseImages(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("ParseImages(%q)[%s] = %q, want %q", tc.in, k, got[k], v)
			}
		}
	}
}

func TestResolve(t *testing.T) {
	im := Images{"24.11": "img:24", "26.05": "img:26"}
	for _, tc := range []struct {
		version, image, want, err string
	}{
		{version: "", want: "img:24"}, // stored before the field: 24.11
		{version: "24.11", want: "img:24"},
		{version: "26.05", want: "img:26"},
		{version: "26.05", image: "mine:1", want: "mine:1"}, // an explicit image wins
	} {
		sc := &sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{SlurmVersion: tc.version, Image: sunkv1.Image(tc.image)}}
		got, err := im.Resolve(sc)
		if err != nil || string(got.Spec.Image) != tc.want {
			t.Errorf("Resolve(%q, %q) = %v, %v; want %q", tc.version, tc.image, got.Spec.Image, err, tc.want)
		}
		if sc.Spec.Image != sunkv1.Image(tc.image) {
			t.Errorf("Resolve wrote into its argument: %q", sc.Spec.Image)
		}
	}
	_, err := Images{"24.11": "img:24"}.Resolve(&sunkv1.SlurmCluster{Spec: sunkv1.SlurmClusterSpec{SlurmVersion: "26.05"}})
	if err == nil || !strings.Contains(err.Error(), "spec.image is empty and the operator has no image of Slurm 26.05") {
		t.Errorf("Resolve without an image of the release: %v", err)
	}
}

func TestMissing(t *testing.T) {
	if m := Missing(sunkv1.SlurmVersion2605); len(m) != 0 {
		t.Errorf("Missing(26.05) = %v, want none", m)
	}
	m := strings.Join(Missing(sunkv1.SlurmVersion2411), "; ")
	for _, want := range []string{"topology.yaml", "topology_str", "REST API v0.0.45 (this release serves up to v0.0.42)"} {
		if !strings.Contains(m, want) {
			t.Errorf("Missing(24.11) = %q, lacks %q", m, want)
		}
	}
	if !FeaturesOf("26.05").TopologyYAML || FeaturesOf("24.11").TopologyYAML {
		t.Error("topology.yaml is for 25.05 and later")
	}
	if !FeaturesOf("26.05").TopologyStr || FeaturesOf("24.11").TopologyStr {
		t.Error("topology_str is for 25.05 and later")
	}
	if !FeaturesOf("26.05").QuiesceTimeout || FeaturesOf("24.11").QuiesceTimeout {
		t.Error("conmgr_quiesce_timeout is 26.05's; 24.11 has no quiesce timeout")
	}
}
