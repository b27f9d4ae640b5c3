package kubectlsunk

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/pkg/wellknown"
)

// flags are kubectl's own connection and output flags.
type flags struct {
	kubeconfig, context, namespace, output, cluster string
	allNamespaces                                   bool
}

// NewCommand is the `kubectl sunk` command tree.
func NewCommand(out io.Writer) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{
		Use:   "kubectl-sunk",
		Short: "Slurm nodes and jobs as Kubernetes and Slurm see them, drain and resume, cluster health",
		Long: "kubectl sunk shows each Slurm node of a sunk cluster beside its compute pod and Kubernetes node,\n" +
			"the running Slurm jobs with their nodes and the pods sunk-scheduler bound to them,\n" +
			"lists the login pods with their users,\n" +
			"drains and resumes the Slurm nodes of a Kubernetes node through sunk's syncer, and reports\n" +
			"the health of every SlurmCluster. It reads Kubernetes objects only.",
		SilenceUsage: true,
	}
	root.SetOut(out)
	pf := root.PersistentFlags()
	pf.StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file")
	pf.StringVar(&f.context, "context", "", "the kubeconfig context to use")
	pf.StringVarP(&f.namespace, "namespace", "n", "", "namespace (default: the context's)")
	pf.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "every namespace")
	pf.StringVarP(&f.output, "output", "o", "", "output format: wide or json")
	root.AddCommand(nodesCommand(f), jobsCommand(f), loginsCommand(f), healthCommand(f), drainCommand(f), resumeCommand(f))
	return root
}

func nodesCommand(f *flags) *cobra.Command {
	c := &cobra.Command{
		Use:   "nodes",
		Short: "Slurm nodes with their compute pod, Kubernetes node and Slurm state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, ns, err := f.viewClients()
			if err != nil {
				return err
			}
			pods, err := f.computePods(cmd, cs, ns)
			if err != nil {
				return err
			}
			return PrintNodes(cmd.OutOrStdout(), NodeRows(pods.Items), f.output)
		},
	}
	c.Flags().StringVar(&f.cluster, "cluster", "", "only this SlurmCluster's nodes")
	return c
}

func jobsCommand(f *flags) *cobra.Command {
	c := &cobra.Command{
		Use:   "jobs",
		Short: "Running Slurm jobs with their Slurm nodes, Kubernetes nodes and the pods bound to them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, ns, err := f.viewClients()
			if err != nil {
				return err
			}
			compute, err := f.computePods(cmd, cs, ns)
			if err != nil {
				return err
			}
			// Pods bound to Slurm jobs run in their users' namespaces, not the cluster's: every
			// namespace when the person may list them, else the one asked for.
			bound, err := cs.CoreV1().Pods(corev1.NamespaceAll).List(cmd.Context(), metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
			if apierrors.IsForbidden(err) && ns != corev1.NamespaceAll {
				fmt.Fprintf(cmd.ErrOrStderr(), "kubectl sunk jobs: pods of other namespaces are not listed: %v\n", err)
				bound, err = cs.CoreV1().Pods(ns).List(cmd.Context(), metav1.ListOptions{FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"})
			}
			if err != nil {
				return err
			}
			return PrintJobs(cmd.OutOrStdout(), InScope(JobRows(compute.Items, bound.Items), ns, f.cluster), f.output)
		},
	}
	c.Flags().StringVar(&f.cluster, "cluster", "", "only this SlurmCluster's jobs")
	return c
}

func loginsCommand(f *flags) *cobra.Command {
	c := &cobra.Command{
		Use:   "logins",
		Short: "Login pods: the shared ones, the Group login pools' and each user's of the PerUser pools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, ns, err := f.viewClients()
			if err != nil {
				return err
			}
			sel := fmt.Sprintf("%s in (%s,%s,%s)", wellknown.LabelComponent, wellknown.ComponentLogin, wellknown.ComponentLoginUser, wellknown.ComponentLoginGroup)
			if f.cluster != "" {
				sel += "," + wellknown.LabelCluster + "=" + f.cluster
			}
			pods, err := cs.CoreV1().Pods(ns).List(cmd.Context(), metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return err
			}
			return PrintLogins(cmd.OutOrStdout(), LoginRows(pods.Items), f.output)
		},
	}
	c.Flags().StringVar(&f.cluster, "cluster", "", "only this SlurmCluster's login pods")
	return c
}

func healthCommand(f *flags) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Each SlurmCluster's conditions and NodeSets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := CheckFormat(f.output); err != nil {
				return err
			}
			_, c, ns, err := f.clients()
			if err != nil {
				return err
			}
			var clusters sunkv1.SlurmClusterList
			var nodeSets sunkv1.NodeSetList
			if err := c.List(cmd.Context(), &clusters, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("listing SlurmClusters (are sunk's CRDs installed?): %w", err)
			}
			if err := c.List(cmd.Context(), &nodeSets, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("listing NodeSets: %w", err)
			}
			return PrintHealth(cmd.OutOrStdout(), Health(clusters.Items, nodeSets.Items), f.output)
		},
	}
}

func drainCommand(f *flags) *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "drain NODE",
		Short: "Drain the Slurm nodes of a Kubernetes node (cordon it with a reason); running jobs finish",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, _, err := f.clients()
			if err != nil {
				return err
			}
			if err := Drain(cmd.Context(), cs, args[0], reason); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node/%s cordoned: sunk's syncer drains its Slurm nodes; `kubectl sunk nodes -o wide` shows them\n", args[0])
			return nil
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why, as Slurm's drain reason shows it")
	return c
}

func resumeCommand(f *flags) *cobra.Command {
	return &cobra.Command{
		Use:   "resume NODE",
		Short: "Resume the Slurm nodes a drain of this Kubernetes node drained (uncordon it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, _, _, err := f.clients()
			if err != nil {
				return err
			}
			if err := Resume(cmd.Context(), cs, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node/%s uncordoned: sunk's syncer resumes the Slurm nodes it drained for the cordon\n", args[0])
			return nil
		},
	}
}

// clients connects as kubectl would and returns the namespace to list ("" for all).
// computePods lists the compute pods in ns, of --cluster's SlurmCluster when it is given.
func (f *flags) computePods(cmd *cobra.Command, cs kubernetes.Interface, ns string) (*corev1.PodList, error) {
	sel := labels.Set{wellknown.LabelComponent: wellknown.ComponentCompute}
	if f.cluster != "" {
		sel[wellknown.LabelCluster] = f.cluster
	}
	return cs.CoreV1().Pods(ns).List(cmd.Context(), metav1.ListOptions{LabelSelector: sel.String()})
}

// viewClients checks the output format and connects, for the views that list pods.
func (f *flags) viewClients() (kubernetes.Interface, string, error) {
	if err := CheckFormat(f.output); err != nil {
		return nil, "", err
	}
	cs, _, ns, err := f.clients()
	return cs, ns, err
}

func (f *flags) clients() (kubernetes.Interface, client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", err
	}
	ns := f.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, nil, "", err
		}
	}
	if f.allNamespaces {
		ns = corev1.NamespaceAll
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := sunkv1.AddToScheme(scheme); err != nil {
		return nil, nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, "", err
	}
	return cs, c, ns, nil
}
