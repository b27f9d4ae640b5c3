package webhook

import (
	"context"
	"fmt"
	"path"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
)

// DefaultPrivilegedGroup may set every field of a SlurmCluster and NodeSet unless the
// installer names other authors (the sunk chart's operator.privilegedAuthors).
const DefaultPrivilegedGroup = "system:masters"

// Authors say who may write the fields of a SlurmCluster or NodeSet that run code as root on
// compute hosts or beside the cluster's keys (rootPowers): the installer's choice, as
// AllowedUnsafeConfKeys is. RBAC decides who may write a SlurmCluster at all; this decides
// who may, by writing one, become root on the machines under it (docs/security.md).
type Authors struct {
	// Users and Groups (Kubernetes user names and groups, as the API server authenticated
	// them) may set and change every field.
	Users, Groups []string
	// Images are patterns (path.Match: sunk.dev/slurm:*, registry.example/slurm@sha256:*) of
	// the images any author may name; an image no pattern matches needs a privileged author.
	Images []string
}

// privileged says whether the request's user is one of the authors.
func (a Authors) privileged(u authenticationv1.UserInfo) bool {
	return slices.Contains(a.Users, u.Username) || slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(a.Groups, g) })
}

// imageAllowed says whether any author may name the image.
func (a Authors) imageAllowed(image sunkv1.Image) bool {
	return slices.ContainsFunc(a.Images, func(p string) bool {
		ok, err := path.Match(p, string(image))
		return err == nil && ok
	})
}

// rootPower is a field set or changed that gives its author root: where, and what it does.
type rootPower struct {
	path *field.Path
	why  string
}

// Why each kind of field is a root power, in the refusal's words.
const (
	whyImage    = "the image runs the Slurm daemons as root (compute pods privileged)"
	whyScript   = "the script runs as root on every compute host"
	whyLua      = "the script runs inside slurmctld at every submission and may change any job"
	whyService  = "the service runs as root in the pod"
	whySidecar  = "the container runs in the pod with its volumes and any securityContext"
	whyHostPath = "a hostPath volume reaches the host's files"
	// Not root, but acting on others: the operator creates the pods, so a NodeSet author who
	// may not create pods would otherwise have kube-scheduler evict other namespaces' pods.
	whyPriority = "a PriorityClass lets the compute pods preempt other namespaces' pods"
)

// clusterRootPowers are the root powers a SlurmCluster update sets or changes (a creation's old
// spec is the empty one, so every one set counts).
func clusterRootPowers(old, spec *sunkv1.SlurmClusterSpec, a Authors) []rootPower {
	p := field.NewPath("spec")
	var out []rootPower
	images := []imageField{
		{p.Child("image"), old.Image, spec.Image},
		{p.Child("controller", "image"), old.Controller.Image, spec.Controller.Image},
		{p.Child("restApi", "image"), old.RestAPI.Image, spec.RestAPI.Image},
		{p.Child("accounting", "image"), old.Accounting.Image, spec.Accounting.Image},
		{p.Child("login", "image"), old.Login.Image, spec.Login.Image},
	}
	// A login pool's image runs its sackd, which holds the key, and its setup as root.
	for i, pool := range spec.Login.Pools {
		var was sunkv1.Image
		for _, o := range old.Login.Pools {
			if o.Name == pool.Name {
				was = o.Image
			}
		}
		images = append(images, imageField{p.Child("login", "pools").Index(i).Child("image"), was, pool.Image})
	}
	out = append(out, imagePowers(a, images)...)
	out = appendChanged(out, p.Child("prolog"), old.Prolog, spec.Prolog, whyScript)
	out = appendChanged(out, p.Child("epilog"), old.Epilog, spec.Epilog, whyScript)
	out = appendChanged(out, p.Child("jobSubmitLua"), old.JobSubmitLua, spec.JobSubmitLua, whyLua)
	out = appendChanged(out, p.Child("login", "services"), old.Login.Services, spec.Login.Services, whyService)
	out = appendChanged(out, p.Child("login", "sidecars"), old.Login.Sidecars, spec.Login.Sidecars, whySidecar)
	return out
}

// nodeSetRootPowers are nodeSet's: clusterRootPowers for a NodeSet.
func nodeSetRootPowers(old, spec *sunkv1.NodeSetSpec, a Authors) []rootPower {
	p := field.NewPath("spec")
	out := imagePowers(a, []imageField{{p.Child("image"), old.Image, spec.Image}})
	out = appendChanged(out, p.Child("services"), old.Services, spec.Services, whyService)
	out = appendChanged(out, p.Child("sidecars"), old.Sidecars, spec.Sidecars, whySidecar)
	out = appendChanged(out, p.Child("volumes"), hostPaths(old.Volumes), hostPaths(spec.Volumes), whyHostPath)
	out = appendChanged(out, p.Child("containers", "cacheVolume"), cacheHostPath(old.Containers), cacheHostPath(spec.Containers), whyHostPath)
	out = appendChanged(out, p.Child("priorityClassName"), old.PriorityClassName, spec.PriorityClassName, whyPriority)
	return out
}

type imageField struct {
	path     *field.Path
	old, new sunkv1.Image
}

// imagePowers: an image changed to one no pattern of a.Images matches.
func imagePowers(a Authors, fields []imageField) []rootPower {
	var out []rootPower
	for _, f := range fields {
		if f.new != "" && f.new != f.old && !a.imageAllowed(f.new) {
			out = append(out, rootPower{f.path, whyImage})
		}
	}
	return out
}

func appendChanged[T any](out []rootPower, p *field.Path, old, cur T, why string) []rootPower {
	if !equality.Semantic.DeepEqual(old, cur) {
		out = append(out, rootPower{p, why})
	}
	return out
}

// hostPaths is the volumes' host paths, with their names, in order: a change of them is a
// change of what the pods reach on the host.
func hostPaths(vols []corev1.Volume) []string {
	var paths []string
	for _, v := range vols {
		if v.HostPath != nil {
			paths = append(paths, v.Name+"="+v.HostPath.Path)
		}
	}
	return paths
}

// cacheHostPath is the host path of a NodeSet's container cache volume, if it is one.
func cacheHostPath(c *sunkv1.NodeSetContainers) string {
	if c == nil || c.CacheVolume == nil || c.CacheVolume.HostPath == nil {
		return ""
	}
	return c.CacheVolume.HostPath.Path
}

// checkCluster refuses, one error per field, the root powers a SlurmCluster creation (old nil)
// or update sets or changes, unless the request's user is a privileged author.
func (a Authors) checkCluster(ctx context.Context, old, sc *sunkv1.SlurmCluster) field.ErrorList {
	user, ok := a.unprivileged(ctx)
	if !ok {
		return nil
	}
	oldSpec := &sunkv1.SlurmClusterSpec{}
	if old != nil {
		oldSpec = &old.Spec
	}
	return a.refuse(user, "SlurmCluster", clusterRootPowers(oldSpec, &sc.Spec, a))
}

// checkNodeSet is checkCluster for a NodeSet.
func (a Authors) checkNodeSet(ctx context.Context, old, ns *sunkv1.NodeSet) field.ErrorList {
	user, ok := a.unprivileged(ctx)
	if !ok {
		return nil
	}
	oldSpec := &sunkv1.NodeSetSpec{}
	if old != nil {
		oldSpec = &old.Spec
	}
	return a.refuse(user, "NodeSet", nodeSetRootPowers(oldSpec, &ns.Spec, a))
}

// unprivileged is the user of an admission request who is not a privileged author. Outside
// admission (the controllers' re-check) there is no author, and nothing to refuse.
func (a Authors) unprivileged(ctx context.Context) (string, bool) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || a.privileged(req.UserInfo) {
		return "", false
	}
	return req.UserInfo.Username, true
}

// refuse is the refusal of each root power to user.
func (a Authors) refuse(user, kind string, powers []rootPower) field.ErrorList {
	var errs field.ErrorList
	for _, pw := range powers {
		errs = append(errs, field.Forbidden(pw.path, fmt.Sprintf("%s, so only the %s authors the operator's installer names may set or change it (%s is not one of users %v, groups %v: the sunk chart's operator.privilegedAuthors; docs/security.md)",
			pw.why, kind, user, a.Users, a.Groups)))
	}
	return errs
}
