package render

import (
	"fmt"
	"strings"
	"unicode"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
	"sunk.dev/sunk/pkg/wellknown"
)

// DatabaseUser and DatabaseName of the managed MariaDB.
const (
	ManagedDatabaseUser = "slurm"
	ManagedDatabaseName = "slurm_acct_db"
)

// SlurmdbdConf renders slurmdbd.conf. It carries the database password, so it lives in a
// Secret, not in the config ConfigMap.
func SlurmdbdConf(sc *sunkv1.SlurmCluster, n clusternames.Names, password string) string {
	host, port, user, db := n.ServiceHost(n.Database), int32(clusternames.MariaDBPort), ManagedDatabaseUser, ManagedDatabaseName
	if ext := sc.Spec.Accounting.External; sc.Spec.Accounting.Mode == sunkv1.AccountingExternal && ext != nil {
		host, user = ext.Host, ext.User
		if ext.Port != 0 {
			port = ext.Port
		}
		if ext.Database != "" {
			db = ext.Database
		}
	}
	lines := []string{
		"# Rendered by sunk for SlurmCluster " + n.Namespace + "/" + n.Cluster + ".",
		"AuthType=auth/slurm",
		"AuthAltTypes=auth/jwt",
		"AuthAltParameters=jwt_key=" + KeysMountDir + "/" + wellknown.SecretJWTKey,
		// slurmdbd insists that DbdHost names the host it runs on: the StatefulSet pod.
		"DbdHost=" + n.AccountingPod(),
		fmt.Sprintf("DbdPort=%d", clusternames.SlurmdbdPort),
		"SlurmUser=slurm",
		"PidFile=/run/slurmdbd.pid",
		"StorageType=accounting_storage/mysql",
		"StorageHost=" + host,
		fmt.Sprintf("StoragePort=%d", port),
		"StorageUser=" + user,
		"StoragePass=" + quoteStoragePassword(password),
		"StorageLoc=" + db,
	}
	return strings.Join(lines, "\n") + "\n"
}

// CheckStoragePassword refuses a database password slurmdbd.conf cannot carry: Slurm's parser
// has no escape for a double quote, and a line break or control character would end the line
// and start another.
func CheckStoragePassword(p string) error {
	for _, r := range p {
		if r == '"' || unicode.IsControl(r) {
			return fmt.Errorf("the password contains %U, which slurmdbd.conf cannot carry", r)
		}
	}
	return nil
}

// quoteStoragePassword writes a password the way Slurm's parser reads it back: that parser
// strips comments before it looks at quotes (a '#' ends the line even inside quotes unless
// written "\#"), then drops every backslash that escapes the next character ("\\" is one
// backslash, and a lone one at the end would join the next line), and a value with a space or
// tab must be quoted.
func quoteStoragePassword(p string) string {
	p = strings.NewReplacer(`\`, `\\`, "#", `\#`).Replace(p)
	if strings.ContainsAny(p, " \t") {
		return `"` + p + `"`
	}
	return p
}
