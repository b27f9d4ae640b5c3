// The SlurmCluster's accounting: where job records go, and the external database's fields.

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// AccountingMode says where job accounting goes.
// +kubebuilder:validation:Enum=None;Managed;External
type AccountingMode string

const (
	// AccountingNone keeps no accounting (sacct has nothing to show).
	AccountingNone AccountingMode = "None"
	// AccountingManaged runs slurmdbd and a MariaDB that sunk owns.
	AccountingManaged AccountingMode = "Managed"
	// AccountingExternal runs slurmdbd against a database the admin provides.
	AccountingExternal AccountingMode = "External"
)

// AccountingSpec configures slurmdbd and its database.
// +kubebuilder:validation:XValidation:rule="self.mode != 'External' || has(self.external)",message="spec.accounting.external is required when mode is External"
// +kubebuilder:validation:XValidation:rule="self.mode == 'External' || !has(self.external)",message="spec.accounting.external is only allowed when mode is External"
type AccountingSpec struct {
	// Mode of accounting.
	// +kubebuilder:default=None
	// +optional
	Mode AccountingMode `json:"mode,omitempty"`

	// Image overrides spec.image for slurmdbd and the managed database.
	// +optional
	Image Image `json:"image,omitempty"`

	// Resources of the slurmdbd container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// DatabaseStorage is the managed database's volume.
	// +optional
	DatabaseStorage StorageSpec `json:"databaseStorage,omitempty"`

	// DatabaseResources of the managed database container.
	// +optional
	DatabaseResources corev1.ResourceRequirements `json:"databaseResources,omitempty"`

	// External is the database when mode is External.
	// +optional
	External *ExternalDatabase `json:"external,omitempty"`
}

// ExternalDatabase is a MySQL/MariaDB server that slurmdbd uses.
type ExternalDatabase struct {
	// Host name or address of the database server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$`
	Host string `json:"host"`

	// Port of the database server.
	// +kubebuilder:default=3306
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port int32 `json:"port,omitempty"`

	// Database name (StorageLoc).
	// +kubebuilder:default=slurm_acct_db
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]{1,64}$`
	// +optional
	Database string `json:"database,omitempty"`

	// User slurmdbd logs in as.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$`
	User string `json:"user"`

	// PasswordSecretRef names the Secret key holding the user's password. The Secret must
	// carry the label sunk.dev/database-password=true: sunk sends the password to Host, which
	// the SlurmCluster's author chooses, so only Secrets meant for that are ever read.
	PasswordSecretRef corev1.SecretKeySelector `json:"passwordSecretRef"`
}
