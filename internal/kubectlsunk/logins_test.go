package kubectlsunk

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sunk.dev/sunk/pkg/wellknown"
)

func loginPod(name, component, pool, user string, ready corev1.ConditionStatus) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "slurm", Labels: map[string]string{
			wellknown.LabelComponent: component, wellknown.LabelCluster: "demo"}},
		Spec: corev1.PodSpec{NodeName: "k1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
	}
	if pool != "" {
		p.Labels[wellknown.LabelLoginPool] = pool
	}
	if user != "" {
		p.Annotations = map[string]string{wellknown.AnnotationLoginUser: user}
	}
	return p
}

func TestLoginsTable(t *testing.T) {
	rows := LoginRows([]corev1.Pod{
		loginPod("demo-login-users-grace-0", wellknown.ComponentLoginUser, "users", "grace", corev1.ConditionFalse),
		computePod("demo-cpu-0", "", "k1", "IDLE", "", corev1.ConditionTrue),
		loginPod("demo-login-0", wellknown.ComponentLogin, "", "", corev1.ConditionTrue),
		loginPod("demo-login-users-john-smith-1a2b3c4d-0", wellknown.ComponentLoginUser, "users", "John.Smith", corev1.ConditionTrue),
		loginPod("demo-login-team-0", wellknown.ComponentLoginGroup, "team", "", corev1.ConditionTrue),
	})
	var out bytes.Buffer
	if err := PrintLogins(&out, rows, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `CLUSTER   POOL       USER         POD                                      READY   NODE
demo      <shared>   *            demo-login-0                             true    k1
demo      team       *            demo-login-team-0                        true    k1
demo      users      grace        demo-login-users-grace-0                 false   k1
demo      users      John.Smith   demo-login-users-john-smith-1a2b3c4d-0   true    k1
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
