// Command sunk-scheduler is kube-scheduler with sunk's Slurm plugin: pods that name the
// scheduler become Slurm placeholder jobs and are bound where Slurm runs them. Flags are
// kube-scheduler's; the plugin is configured in the KubeSchedulerConfiguration (docs/scheduler.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"sunk.dev/sunk/scheduler/plugin"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(plugin.Name, plugin.New))
	os.Exit(cli.Run(cmd))
}
