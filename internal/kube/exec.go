// Package kube holds small Kubernetes helpers shared by sunk's controllers.
package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

// Execer runs a command in a container and returns its standard output.
type Execer interface {
	Exec(ctx context.Context, namespace, pod, container string, command ...string) (string, error)
}

// PodExecer execs through the apiserver, like kubectl exec (websocket, SPDY fallback).
type PodExecer struct {
	Config    *rest.Config
	Clientset kubernetes.Interface
}

// NewPodExecer builds a PodExecer from a rest config.
func NewPodExecer(cfg *rest.Config) (*PodExecer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &PodExecer{Config: cfg, Clientset: cs}, nil
}

func (e *PodExecer) Exec(ctx context.Context, namespace, pod, container string, command ...string) (string, error) {
	return e.ExecStdin(ctx, nil, namespace, pod, container, command...)
}

// ExecStdin is Exec with stdin as the command's standard input (nil: none).
func (e *PodExecer) ExecStdin(ctx context.Context, stdin io.Reader, namespace, pod, container string, command ...string) (string, error) {
	req := e.Clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.Config, "POST", req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.Config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	// Only a refused websocket upgrade falls back to SPDY, as kubectl does: on any other error
	// (a command that exited non-zero is one) the command has run, and SPDY would run it a
	// second time, its output appended to the first's.
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("exec %s in %s/%s: %w: %s", strings.Join(command, " "), namespace, pod, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// LogReader reads a container's log.
type LogReader interface {
	Log(ctx context.Context, namespace, pod, container string, since time.Time) (string, error)
}

// podLogLimit bounds a log read: the lines looked for are near the start of the window.
const podLogLimit = 4 << 20

// Log returns the container's log since a time (at most podLogLimit bytes).
func (e *PodExecer) Log(ctx context.Context, namespace, pod, container string, since time.Time) (string, error) {
	b, err := e.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, SinceTime: &metav1.Time{Time: since}, LimitBytes: ptr.To(int64(podLogLimit)),
	}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("log of %s/%s container %s: %w", namespace, pod, container, err)
	}
	return string(b), nil
}
