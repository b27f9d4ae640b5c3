package slurmcluster

// The reconcile step of an auth key rotation (authrotation.go decides the round).

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/internal/render"
	"sunk.dev/sunk/internal/slurmconn"
	"sunk.dev/sunk/pkg/slurm"
	"sunk.dev/sunk/pkg/wellknown"
)

// keyHolders are the containers that read the auth key, by the component of their pod.
var keyHolders = map[string]string{
	wellknown.ComponentController: render.ControllerContainer,
	wellknown.ComponentAccounting: "slurmdbd",
	wellknown.ComponentLogin:      render.SackdContainer,
	wellknown.ComponentLoginUser:  render.SackdContainer,
	wellknown.ComponentLoginGroup: render.SackdContainer,
	wellknown.ComponentCompute:    clusternames.SlurmdContainer,
}

// keyWatchLine is what sunk-keywatch (images/slurm) prints when kubelet delivered a ring.
func keyWatchLine(ringID string) string { return "sunk-keys: " + render.AuthRingName + " " + ringID }

const authPoll = 3 * time.Second

// authReconfigured remembers, per cluster, the ring a reconfigure was made for and when.
type authReconfigured struct {
	ring   string
	at     time.Time
	failed bool // the request failed; it may still have been carried out
}

// followAuthKey brings the auth key ring one round nearer the key id an admin named in
// AnnotationAuthKeyID, and says where it stands in the AuthKeyRotated condition.
func (r *Reconciler) followAuthKey(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, jwtKeys slurmconn.Keys, st *status) (ctrl.Result, error) {
	wanted := sc.Annotations[wellknown.AnnotationAuthKeyID]
	if wanted == "" {
		return ctrl.Result{}, nil
	}
	refuse := func(msg string) (ctrl.Result, error) {
		r.event(sc, corev1.EventTypeWarning, sunkv1.ReasonAuthKeyRefused, msg)
		st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthKeyRefused, msg)
		return ctrl.Result{}, nil
	}
	if err := render.CheckAuthRingKid(wanted); err != nil {
		return refuse(fmt.Sprintf("annotation %s: %v", wellknown.AnnotationAuthKeyID, err))
	}
	deadline, err := authDeadline(sc.Annotations[wellknown.AnnotationAuthKeyDeadline])
	if err != nil {
		return refuse(fmt.Sprintf("annotation %s: %v", wellknown.AnnotationAuthKeyDeadline, err))
	}
	secret := &corev1.Secret{}
	if err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.AuthSecret}, secret); err != nil {
		return ctrl.Result{}, err
	}
	f := authFacts{wanted: wanted, ownSecret: secret.Labels[wellknown.LabelCluster] == sc.Name, deadline: deadline}
	var oldJobs []slurm.Job
	var ringID string
	if b := secret.Data[render.AuthRingName]; b != nil {
		ring, err := render.ParseAuthRing(b)
		if err != nil {
			return refuse(fmt.Sprintf("Secret %s: %v", n.AuthSecret, err))
		}
		f.ring, ringID = ring, keyID(b)
		loadedID, at, _ := strings.Cut(secret.Annotations[wellknown.AnnotationAuthRingLoaded], "@")
		if loadedAt, err := time.Parse(time.RFC3339, at); err == nil && loadedID == ringID {
			f.loaded, f.sinceLoaded = true, time.Since(loadedAt)
			if ring.Has(wanted) && len(ring.Keys) > 1 && f.sinceLoaded >= authTokenLifetime {
				if oldJobs, err = r.jobsStartedBefore(ctx, sc, n, jwtKeys, loadedAt); err != nil {
					return ctrl.Result{}, err
				}
				f.oldJobs = len(oldJobs)
			}
		}
	}

	step := nextAuthStep(f)
	switch step {
	case authSteady:
		st.set(sunkv1.ConditionAuthKeyRotated, true, sunkv1.ReasonAuthKeyCurrent, "every daemon signs with auth key "+wanted)
		return ctrl.Result{}, nil
	case authRefused:
		return refuse(fmt.Sprintf("Secret %s was not made by sunk and is never written by it: rotate its slurm.jwks yourself (docs/security.md)", n.AuthSecret))
	case authWaitTokens, authWaitJobs:
		next := "key " + wanted + " becomes the default"
		if f.ring.Default() == wanted {
			next = "key(s) " + otherKids(f.ring, wanted) + " leave the ring"
		}
		msg := fmt.Sprintf("every daemon has loaded %s %s; %s once the tokens signed before have expired (%s)", render.AuthRingName, ringID, next, authTokenLifetime)
		if step == authWaitJobs {
			msg = fmt.Sprintf("every daemon has loaded %s %s; %s once the %d job(s) that started before end: their slurmstepds sign with the keys they read at their start",
				render.AuthRingName, ringID, next, f.oldJobs)
			if f.deadline > 0 {
				msg += fmt.Sprintf("; they are requeued %s after the ring was loaded (%s)", f.requeueAfter(), wellknown.AnnotationAuthKeyDeadline)
			} else {
				msg += fmt.Sprintf(" (%s bounds the wait)", wellknown.AnnotationAuthKeyDeadline)
			}
		}
		st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthWaitingForJobs, msg)
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	case authWaitLoad:
		return r.loadAuthRing(ctx, sc, n, jwtKeys, secret, ringID, st)
	case authRequeueOld:
		return r.requeueOldJobs(ctx, sc, n, jwtKeys, oldJobs, st)
	}

	// A round: write the next ring.
	next, round := f.ring, ""
	switch step {
	case authConvert:
		next, round = &render.AuthRing{Keys: []render.AuthRingKey{render.NewAuthRingKey(authInitialKid, secret.Data[render.AuthKeyName])}}, "0 (slurm.key becomes the ring's only key, "+authInitialKid+")"
	case authAddKey:
		key, err := randomBytes(authKeyBytes)
		if err != nil {
			return ctrl.Result{}, err
		}
		next, round = &render.AuthRing{Keys: append(append([]render.AuthRingKey{}, f.ring.Keys...), render.NewAuthRingKey(wanted, key))}, "1 (key "+wanted+" added, not the default)"
	case authMakeDefault:
		next, round = f.ring.WithDefault(wanted), "2 (key "+wanted+" is the default)"
	case authDropOld:
		next, round = f.ring.Only(wanted), "3 (key(s) "+otherKids(f.ring, wanted)+" dropped)"
	}
	if err := next.Check(); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data[render.AuthRingName] = next.Marshal()
	// slurm.key follows the default key: what a pod of an image that reads only slurm.key gets.
	if b, err := keyBytes(next, next.Default()); err == nil {
		secret.Data[render.AuthKeyName] = b
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[wellknown.AnnotationAuthRingWritten] = time.Now().UTC().Format(time.RFC3339)
	if err := r.Patch(ctx, secret, patch); err != nil {
		return ctrl.Result{}, err
	}
	msg := fmt.Sprintf("auth key rotation round %s: wrote %s %s to Secret %s", round, render.AuthRingName, keyID(secret.Data[render.AuthRingName]), n.AuthSecret)
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonAuthRingWritten, msg)
	st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthRingWritten, msg)
	return ctrl.Result{RequeueAfter: authPoll}, nil
}

// loadAuthRing has every daemon load the Secret's ring: each key holder's pod must show it
// (sunk-keywatch's line in its log; slurmdbd, which reads it only at start, in a container
// started after the ring was written), then one reconfigure re-executes slurmctld, slurmd and
// sackd, and every running slurmd must have started since (its slurmd_start_time). Then the
// Secret records the ring as loaded.
func (r *Reconciler) loadAuthRing(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, jwtKeys slurmconn.Keys, secret *corev1.Secret, ringID string, st *status) (ctrl.Result, error) {
	wait := func(msg string) (ctrl.Result, error) {
		st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthRingLoading, msg)
		return ctrl.Result{RequeueAfter: authPoll}, nil
	}
	if r.Logs == nil {
		return wait("the operator cannot read pod logs, where pods show the key ring they see")
	}
	written, err := time.Parse(time.RFC3339, secret.Annotations[wellknown.AnnotationAuthRingWritten])
	if err != nil {
		written = time.Now().Add(-time.Hour) // a ring the operator did not write: any line of it counts
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(n.Namespace), client.MatchingLabels{wellknown.LabelCluster: sc.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var missing, computeNodes []string
	for i := range pods.Items {
		pod := &pods.Items[i]
		container, holds := keyHolders[pod.Labels[wellknown.LabelComponent]]
		started := containerStarted(pod, container)
		if !holds || !pod.DeletionTimestamp.IsZero() || started.IsZero() {
			continue // a container that starts later reads the ring there is then
		}
		if pod.Labels[wellknown.LabelComponent] == wellknown.ComponentAccounting && started.Before(written) {
			missing = append(missing, pod.Name+" (slurmdbd restarts to load it)")
			continue
		}
		// Kubelet may log a second late; the ring's id, new with each round, is the proof.
		log, err := r.Logs.Log(ctx, pod.Namespace, pod.Name, container, written.Add(-time.Minute))
		if err != nil {
			return ctrl.Result{}, err
		}
		if !strings.Contains(log, keyWatchLine(ringID)) {
			missing = append(missing, pod.Name)
			// Any change of the pod makes kubelet refresh its volumes now.
			if err := r.annotate(ctx, pod, wellknown.AnnotationAuthRing, ringID); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		if pod.Labels[wellknown.LabelComponent] == wellknown.ComponentCompute {
			computeNodes = append(computeNodes, pod.Labels[wellknown.LabelSlurmNode])
		}
	}
	if len(missing) > 0 {
		return wait(fmt.Sprintf("waiting for kubelet to deliver %s %s to %s (a pod of an image without sunk-keywatch never shows it: replace it)",
			render.AuthRingName, ringID, strings.Join(missing, ", ")))
	}
	sl, err := r.slurmFor(ctx, sc, n, jwtKeys)
	if err != nil {
		return ctrl.Result{}, err
	}
	v, _ := r.authReconfigured.LoadOrStore(sc.UID, &sync.Map{})
	rec, sent := v.(*sync.Map).Load(ringID)
	last, _ := rec.(authReconfigured)
	if !sent || (last.failed && time.Since(last.at) >= reconfigureRetry) {
		at := time.Now()
		err := r.reconfigure(ctx, sc, sl, fmt.Sprintf("to load %s %s", render.AuthRingName, ringID))
		var held *reconfigureHeldError
		if errors.As(err, &held) {
			return wait(err.Error())
		}
		// A failed request may still be carried out (reconfigureRetry): the slurmd
		// re-executions below tell.
		v.(*sync.Map).Store(ringID, authReconfigured{ring: ringID, at: at, failed: err != nil})
		if err != nil {
			return wait(err.Error())
		}
		return wait(fmt.Sprintf("every pod sees %s %s; reconfigured slurmctld to load it", render.AuthRingName, ringID))
	}
	since := last.at.Add(-time.Second) // Slurm's times are whole seconds
	nodes, err := r.Slurm.Nodes(ctx, n, sc.Spec.Controller.NodeWatcher, sl)
	if err != nil {
		return ctrl.Result{}, err
	}
	started := map[string]time.Time{}
	for _, nd := range nodes {
		started[nd.Name] = nd.SlurmdStartTime
	}
	var stale []string
	for _, name := range computeNodes {
		if started[name].Before(since) {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		return wait(fmt.Sprintf("waiting for slurmd of %s to re-execute after the reconfigure", strings.Join(stale, ", ")))
	}
	if last.failed && len(computeNodes) == 0 {
		return wait(fmt.Sprintf("the reconfigure to load %s %s failed, and no slurmd shows whether slurmctld carried it out: it is sent again %s after the last",
			render.AuthRingName, ringID, reconfigureRetry))
	}
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[wellknown.AnnotationAuthRingLoaded] = ringID + "@" + time.Now().UTC().Format(time.RFC3339)
	if err := r.Patch(ctx, secret, patch); err != nil {
		return ctrl.Result{}, err
	}
	msg := fmt.Sprintf("every daemon has loaded %s %s", render.AuthRingName, ringID)
	r.event(sc, corev1.EventTypeNormal, sunkv1.ReasonAuthRingLoaded, msg)
	st.set(sunkv1.ConditionAuthKeyRotated, false, sunkv1.ReasonAuthRingLoaded, msg)
	return ctrl.Result{RequeueAfter: authPoll}, nil
}

// jobsStartedBefore lists the jobs still running (or suspended, or completing) that started
// before t: their slurmstepds read the ring at their start and sign with its default key.
func (r *Reconciler) jobsStartedBefore(ctx context.Context, sc *sunkv1.SlurmCluster, n clusternames.Names, jwtKeys slurmconn.Keys, t time.Time) ([]slurm.Job, error) {
	sl, err := r.slurmFor(ctx, sc, n, jwtKeys)
	if err != nil {
		return nil, err
	}
	jobs, err := sl.ListJobs(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	var old []slurm.Job
	for _, j := range jobs.Jobs {
		if (j.HasState("RUNNING") || j.HasState("SUSPENDED") || j.HasState("COMPLETING")) &&
			!j.StartTime.IsZero() && j.StartTime.Before(t) {
			old = append(old, j)
		}
	}
	return old, nil
}

// containerStarted is when the named container last started running (zero when it is not).
func containerStarted(pod *corev1.Pod, container string) time.Time {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

func otherKids(ring *render.AuthRing, kid string) string {
	var out []string
	for _, k := range ring.Keys {
		if k.Kid != kid {
			out = append(out, k.Kid)
		}
	}
	return strings.Join(out, ", ")
}

func keyBytes(ring *render.AuthRing, kid string) ([]byte, error) {
	for _, k := range ring.Keys {
		if k.Kid == kid {
			return k.Bytes()
		}
	}
	return nil, fmt.Errorf("no key %q", kid)
}

// authRingID names the auth Secret's key ring by a hash prefix ("" without a ring).
func (r *Reconciler) authRingID(ctx context.Context, n clusternames.Names) (string, error) {
	secret := &corev1.Secret{}
	if err := r.notOnlyOwned().Get(ctx, types.NamespacedName{Namespace: n.Namespace, Name: n.AuthSecret}, secret); err != nil {
		return "", err
	}
	if b := secret.Data[render.AuthRingName]; b != nil {
		return keyID(b), nil
	}
	return "", nil
}
