// The namespace → Slurm policy of sunk-scheduler: which namespaces may ask Slurm for what
// (docs/scheduler.md, Tenancy).

package v1alpha1

import (
	"strconv"

	"sunk.dev/sunk/pkg/slurmconf"
)

// SchedulerPolicy is the namespace → Slurm policy of sunk-scheduler (docs/scheduler.md,
// Tenancy). A pod outside its namespace's policy is not submitted: its PodScheduled condition
// names the rule it broke, and it preempts nothing.
type SchedulerPolicy struct {
	// Tenants are groups of namespaces and what their pods may ask of Slurm. A namespace may
	// belong to one tenant only.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Tenants []SchedulerTenant `json:"tenants,omitempty"`

	// Unlisted is what the pods of a namespace no tenant lists may ask of Slurm.
	// DefaultPartition (the default): jobs in the default partition, with no account, QOS,
	// reservation or priority of their own and no preemption. Deny: nothing; their pods are
	// refused, so that the cluster's machines go only to the namespaces a tenant lists.
	// +kubebuilder:validation:Enum=DefaultPartition;Deny
	// +optional
	Unlisted SchedulerUnlisted `json:"unlisted,omitempty"`
}

// SchedulerUnlisted is SchedulerPolicy.Unlisted.
type SchedulerUnlisted string

// The values of SchedulerPolicy.Unlisted.
const (
	UnlistedDefaultPartition SchedulerUnlisted = "DefaultPartition"
	UnlistedDeny             SchedulerUnlisted = "Deny"
)

// SchedulerTenant is what the pods of some namespaces may ask of Slurm through the
// sunk.dev/partition, account, qos, reservation and priority annotations. Each list may be
// ["*"]: any value. An empty list allows no override (for partitions: only the default one).
type SchedulerTenant struct {
	// Name of the tenant, named in the condition of a pod it refuses.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Namespaces whose pods this tenant covers.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces"`

	// Partitions the pods may name (sunk.dev/partition), of spec.partitions. A pod that names
	// none runs in the default partition, which every namespace may use.
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z0-9][A-Za-z0-9_-]{0,63})$`
	// +optional
	Partitions []string `json:"partitions,omitempty"`

	// Accounts the pods may charge (sunk.dev/account).
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})$`
	// +optional
	Accounts []string `json:"accounts,omitempty"`

	// DefaultAccount is the account the job of a pod that names none (sunk.dev/account) is
	// charged to. Every placeholder job runs as one Slurm user, so an account per tenant is
	// what lets Slurm's accounting, fair share and limits (AccountingStorageEnforce) tell
	// tenants apart. It must be one of accounts (or accounts ["*"]); the scheduler's Slurm user
	// needs an association with it in accounting (sacctmgr add user ... account=...).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`
	// +optional
	DefaultAccount string `json:"defaultAccount,omitempty"`

	// QOS the pods may use (sunk.dev/qos).
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})$`
	// +optional
	QOS []string `json:"qos,omitempty"`

	// Reservations the pods may run in (sunk.dev/reservation).
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^(\*|[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})$`
	// +optional
	Reservations []string `json:"reservations,omitempty"`

	// MaxPriority is the highest job priority the pods may set (sunk.dev/priority). Unset:
	// they may set none, and Slurm's priority plugin decides.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967294
	// +optional
	MaxPriority *int64 `json:"maxPriority,omitempty"`

	// MaxGangSize is the most members a gang of the pods may have (sunk.dev/gang-size): a gang
	// is one Slurm job, and a gang of exclusive members holds that many whole nodes. Unset: any
	// size the scheduler takes (10,000).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxGangSize *int32 `json:"maxGangSize,omitempty"`

	// Preempt lets the pods use what preempts other Slurm jobs: with spec.preemption.type
	// partition_prio, a partition whose priority tier is above the cluster's lowest; with qos,
	// any QOS (a QOS's Preempt list, which lives in accounting, decides). Without it such pods
	// are refused.
	// +optional
	Preempt bool `json:"preempt,omitempty"`
}

// TenantOf is the tenant a namespace belongs to; nil for a namespace no tenant lists.
func (p *SchedulerPolicy) TenantOf(namespace string) *SchedulerTenant {
	for i := range p.Tenants {
		for _, ns := range p.Tenants[i].Namespaces {
			if ns == namespace {
				return &p.Tenants[i]
			}
		}
	}
	return nil
}

// AllowsAny is the wildcard of a tenant's lists.
const AllowsAny = "*"

// EffectivePartitions are the partitions slurmctld runs: spec.partitions, or the one default
// partition "all" without any.
func (s *SlurmClusterSpec) EffectivePartitions() []PartitionSpec {
	if len(s.Partitions) == 0 {
		return []PartitionSpec{{Name: "all", Default: true}}
	}
	return s.Partitions
}

// DefaultPartition is the partition of jobs that name none: the one marked default, else
// the first (as sunk renders slurm.conf).
func (s *SlurmClusterSpec) DefaultPartition() string {
	parts := s.EffectivePartitions()
	for _, p := range parts {
		if p.Default {
			return p.Name
		}
	}
	return parts[0].Name
}

// Tier is the partition's PriorityTier as slurmctld sees it: priorityTier, else a
// PriorityTier= in extraConf, else Slurm's default 1.
func (p *PartitionSpec) Tier() int32 {
	if p.PriorityTier != nil {
		return *p.PriorityTier
	}
	params, _ := slurmconf.Parse(p.ExtraConf) // admission refuses text it cannot read
	if v, ok := params.Value("PriorityTier"); ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			return int32(n)
		}
	}
	return 1
}
