// Package slurmversion is the one home of what differs between the Slurm releases a
// SlurmCluster may run (spec.slurmVersion): the image each runs unless the spec names one, and
// the features sunk renders only for releases that have them.
package slurmversion

import (
	"fmt"
	"slices"
	"strings"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// Images are the operator's Slurm image per release: the image a SlurmCluster without
// spec.image runs.
type Images map[string]string

// DefaultImagesFlag is the operator's --slurm-images default, the sunk chart's
// operator.slurmImages default too: the images `hack/images.sh slurm` builds. Nothing publishes
// Slurm images for sunk; a cluster elsewhere names its registry's (docs/user-guide.md).
const DefaultImagesFlag = "24.11=sunk.dev/slurm:24.11-local,26.05=sunk.dev/slurm:26.05-local"

// ParseImages reads "24.11=REF,26.05=REF" (the operator's --slurm-images). Every release must
// be a supported one; a release left out has no default image, and its clusters must set
// spec.image.
func ParseImages(s string) (Images, error) {
	im := Images{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		v, ref, ok := strings.Cut(kv, "=")
		if !ok || ref == "" {
			return nil, fmt.Errorf("--slurm-images: %q is not RELEASE=IMAGE", kv)
		}
		if !slices.Contains(sunkv1.SlurmVersions(), v) {
			return nil, fmt.Errorf("--slurm-images: release %q is not one of %s", v, strings.Join(sunkv1.SlurmVersions(), ", "))
		}
		im[v] = ref
	}
	return im, nil
}

// Resolve returns sc with spec.image filled in from the release's image when the spec names
// none: a copy, never written back (the field stays empty, so that raising spec.slurmVersion
// changes the image). A cluster without an image for its release gets an error that says so.
func (im Images) Resolve(sc *sunkv1.SlurmCluster) (*sunkv1.SlurmCluster, error) {
	if sc.Spec.Image != "" {
		return sc, nil
	}
	v := sc.Spec.Version()
	ref, ok := im[v]
	if !ok {
		return nil, fmt.Errorf("spec.image is empty and the operator has no image of Slurm %s (its --slurm-images, the sunk chart's operator.slurmImages)", v)
	}
	out := sc.DeepCopy()
	out.Spec.Image = sunkv1.Image(ref)
	return out, nil
}

// Features are what a release lets sunk render.
type Features struct {
	// TopologyYAML: slurmctld reads topology.yaml (25.05 and later), where each partition may
	// have a topology of its own; older releases read one cluster-wide topology.conf.
	TopologyYAML bool
	// TopologyStr: slurmctld moves a node by the topology_str of a node update (25.05 and
	// later, REST v0.0.43 and later), without a reconfigure; older releases move nodes only
	// by topology.conf and a reconfigure.
	TopologyStr bool
	// NewestREST is the newest REST data version slurmrestd serves.
	NewestREST string
	// QuiesceTimeout: slurmctld's connection manager gives up waiting for connections when it
	// quiesces (to hand control back, reconfigure or stop) after conmgr_quiesce_timeout
	// (26.05); 24.11 has no such timeout, and no such parameter.
	QuiesceTimeout bool
	// QuietSlurmdConnect: slurmd takes a connection closed without a message silently (26.05's
	// connection manager), so kubelet may probe its port; 24.11 logs "service_connection:
	// slurm_receive_msg" for each (src/slurmd/slurmd/slurmd.c), one error a probe period.
	QuietSlurmdConnect bool
}

// FeaturesOf is the feature table of a supported release (spec.Version()).
func FeaturesOf(v string) Features {
	if v == sunkv1.SlurmVersion2411 {
		return Features{NewestREST: "v0.0.42"}
	}
	return Features{TopologyYAML: true, TopologyStr: true, NewestREST: "v0.0.45", QuiesceTimeout: true, QuietSlurmdConnect: true}
}

// Missing names, for the FeaturesAvailable condition, what release v lacks that the newest
// supported release has, and what the cluster gets instead; empty on the newest.
func Missing(v string) []string {
	f, newest := FeaturesOf(v), FeaturesOf(sunkv1.SlurmVersions()[len(sunkv1.SlurmVersions())-1])
	var out []string
	if newest.TopologyYAML && !f.TopologyYAML {
		out = append(out, "topology.yaml (a topology per partition; this release gets one cluster-wide topology.conf)")
	}
	if newest.TopologyStr && !f.TopologyStr {
		out = append(out, "topology_str (a relabelled node moves by a node update; this release moves it by topology.conf and a reconfigure)")
	}
	if f.NewestREST != newest.NewestREST {
		out = append(out, fmt.Sprintf("REST API %s (this release serves up to %s)", newest.NewestREST, f.NewestREST))
	}
	return out
}
