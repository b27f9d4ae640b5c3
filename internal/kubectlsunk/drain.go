package kubectlsunk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"sunk.dev/sunk/pkg/wellknown"
)

// DrainPatch is the merge patch that asks the syncer to drain every Slurm node a Kubernetes
// node hosts: a cordon, with the reason the syncer puts into Slurm's drain reason
// ("k8s: node cordoned (<reason>)", docs/syncer.md). Running jobs finish; no new job starts.
func DrainPatch(reason string) ([]byte, error) {
	if strings.ContainsAny(reason, "\n\r") {
		return nil, fmt.Errorf("--reason: a drain reason is one line")
	}
	ann := map[string]any{wellknown.AnnotationCordonReason: nil}
	if reason != "" {
		ann[wellknown.AnnotationCordonReason] = reason
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}, "spec": map[string]any{"unschedulable": true}})
}

// ResumePatch undoes DrainPatch: the syncer resumes the Slurm nodes it drained for the cordon
// (a drain a person set in Slurm stays).
func ResumePatch() []byte {
	return []byte(`{"metadata":{"annotations":{"` + wellknown.AnnotationCordonReason + `":null}},"spec":{"unschedulable":null}}`)
}

// Drain cordons node with reason.
func Drain(ctx context.Context, cs kubernetes.Interface, node, reason string) error {
	patch, err := DrainPatch(reason)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Resume uncordons node.
func Resume(ctx context.Context, cs kubernetes.Interface, node string) error {
	_, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, ResumePatch(), metav1.PatchOptions{})
	return err
}
