package plugin

import (
	"fmt"

	"sunk.dev/sunk/pkg/clustertls"
	"sunk.dev/sunk/pkg/nodewatch"
	"sunk.dev/sunk/pkg/slurm"
)

// nodeInformer is where the plugin reads Slurm's nodes: the cluster's node watchers when
// args.NodeWatcherURL names them (each answer only what changed, and no full list through
// slurmrestd at every change), else slurmrestd's node list polled every PollInterval. Either
// way it fails closed: no answer is not "no nodes". The watchers answer tokens of the
// cluster's JWT key naming SlurmUser: tokens, the source of c's.
func nodeInformer(c slurm.Client, args Args, tokens slurm.TokenSource, roots clustertls.Roots) (*slurm.Informer[string, slurm.Node], error) {
	opts := slurm.InformerOptions{Interval: args.PollInterval.Duration}
	if args.NodeWatcherURL == "" {
		return slurm.NewNodeInformer(c, opts), nil
	}
	w, err := nodewatch.NewClient(args.NodeWatcherURL, 0, tokens)
	if err != nil {
		return nil, fmt.Errorf("nodeWatcherURL: %w", err)
	}
	cfg, err := clientTLS(args, args.NodeWatcherURL, roots)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		w.SetTLSConfig(cfg)
	}
	return slurm.NewNodeChangeInformer(w, opts), nil
}
