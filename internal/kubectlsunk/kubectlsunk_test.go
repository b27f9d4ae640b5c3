package kubectlsunk

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

func computePod(name, slurmNode, node, state, reason string, available corev1.ConditionStatus) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "slurm", Labels: map[string]string{
			wellknown.LabelComponent: wellknown.ComponentCompute, wellknown.LabelCluster: "demo", wellknown.LabelNodeSet: "cpu"}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if slurmNode != "" {
		p.Labels[wellknown.LabelSlurmNode] = slurmNode
	}
	if state != "" {
		p.Annotations = map[string]string{wellknown.AnnotationSlurmState: state, wellknown.AnnotationSlurmReason: reason}
	}
	if available != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodConditionType(wellknown.ConditionSlurmNode), Status: available}}
	}
	return p
}

func TestNodesTable(t *testing.T) {
	pods := []corev1.Pod{
		computePod("demo-cpu-1", "", "k2", "DRAIN", "k8s: node cordoned (bad GPU 3)", corev1.ConditionFalse),
		computePod("demo-cpu-0", "", "k1", "IDLE", "", corev1.ConditionTrue),
		computePod("demo-cpu-x", "gpu-7", "", "", "", ""),
		{ObjectMeta: metav1.ObjectMeta{Name: "login-0", Namespace: "slurm", Labels: map[string]string{wellknown.LabelComponent: wellknown.ComponentLogin}}},
	}
	rows := NodeRows(pods)
	var b bytes.Buffer
	if err := PrintNodes(&b, rows, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `CLUSTER   SLURM NODE   STATE        REASON                           POD          NODE
demo      demo-cpu-0   IDLE         -                                demo-cpu-0   k1
demo      demo-cpu-1   DRAIN        k8s: node cordoned (bad GPU 3)   demo-cpu-1   k2
demo      gpu-7        <unsynced>   -                                demo-cpu-x   <none>
`
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := PrintNodes(&b, rows, FormatWide); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 4 || !strings.Contains(lines[2], "False") || !strings.HasPrefix(lines[0], "NAMESPACE") {
		t.Fatalf("wide:\n%s", b.String())
	}
	b.Reset()
	if err := PrintNodes(&b, rows, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct{ Items []NodeRow }
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || len(doc.Items) != 3 || doc.Items[1].SlurmReason != "k8s: node cordoned (bad GPU 3)" {
		t.Fatalf("json %s: %v", b.String(), err)
	}
	if err := CheckFormat("yaml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Fatalf("CheckFormat(yaml) = %v, want an error naming --output", err)
	}
}

// TestDrainAndResume: drain cordons with the reason the syncer reads; resume removes both; a
// reason of two lines is refused naming the flag.
func TestDrainAndResume(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "k1"}})
	if err := Drain(ctx, cs, "k1", "bad GPU 3"); err != nil {
		t.Fatal(err)
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, "k1", metav1.GetOptions{})
	if !n.Spec.Unschedulable || n.Annotations[wellknown.AnnotationCordonReason] != "bad GPU 3" {
		t.Fatalf("after drain: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if err := Resume(ctx, cs, "k1"); err != nil {
		t.Fatal(err)
	}
	n, _ = cs.CoreV1().Nodes().Get(ctx, "k1", metav1.GetOptions{})
	if n.Spec.Unschedulable || n.Annotations[wellknown.AnnotationCordonReason] != "" {
		t.Fatalf("after resume: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if err := Drain(ctx, cs, "k1", "a\nb"); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("two-line reason: %v, want an error naming --reason", err)
	}
}

func TestHealth(t *testing.T) {
	clusters := []sunkv1.SlurmCluster{{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "slurm"},
		Status: sunkv1.SlurmClusterStatus{Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "RestApiNotReady", Message: "slurmrestd:\n0/1 ready"},
			{Type: "ControllerReady", Status: metav1.ConditionTrue, Reason: "Ready"},
		}}}}
	nodeSets := []sunkv1.NodeSet{
		{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: "slurm"}, Spec: sunkv1.NodeSetSpec{ClusterRef: "demo"},
			Status: sunkv1.NodeSetStatus{Desired: 3, Ready: 2, Busy: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "slurm"}, Spec: sunkv1.NodeSetSpec{ClusterRef: "elsewhere"}},
	}
	var b bytes.Buffer
	if err := PrintHealth(&b, Health(clusters, nodeSets), FormatTable); err != nil {
		t.Fatal(err)
	}
	failedOver := sunkv1.SlurmCluster{ObjectMeta: metav1.ObjectMeta{Name: "fo", Namespace: "slurm"},
		Status: sunkv1.SlurmClusterStatus{Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "BackupInCharge", Message: "on the backup"},
			{Type: "ControllerReady", Status: metav1.ConditionTrue, Reason: "BackupInCharge", Message: "fo-controller-1 serves"},
		}}}
	b.Reset()
	if err := PrintHealth(&b, Health([]sunkv1.SlurmCluster{failedOver}, nil), FormatTable); err != nil {
		t.Fatal(err)
	}
	if want := "SlurmCluster slurm/fo   Ready=True\n" +
		"  Ready=True            BackupInCharge   on the backup\n"; b.String() != want {
		t.Fatalf("health of a failed-over cluster:\n%q\nwant:\n%q", b.String(), want)
	}
	b.Reset()
	if err := PrintHealth(&b, Health(clusters, nodeSets), FormatTable); err != nil {
		t.Fatal(err)
	}
	want := "SlurmCluster slurm/demo   Ready=False\n" +
		"  Ready=False             RestApiNotReady   slurmrestd: 0/1 ready\n" +
		"  NodeSet cpu             desired 3, ready 2, busy 1, drained 0\n"
	if b.String() != want {
		t.Fatalf("health:\n%q\nwant:\n%q", b.String(), want)
	}
}
