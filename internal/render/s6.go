// s6 services: the ConfigMap, volume and hash of the extra services a pod runs beside its
// Slurm daemon.

package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	sunkv1 "sunk.dev/sunk/api/v1alpha1"
	"sunk.dev/sunk/internal/clusternames"
)

// S6ServicesConfigMap holds s6 services as <name>/run and <name>/type items.
func S6ServicesConfigMap(n clusternames.Names, name, component string, services []sunkv1.S6Service) *corev1.ConfigMap {
	data := map[string]string{}
	for _, s := range services {
		data[s.Name+".run"] = s.Run
		data[s.Name+".type"] = string(s6Type(s)) + "\n"
	}
	return &corev1.ConfigMap{ObjectMeta: meta(n, name, component), Data: data}
}

func s6Type(s sunkv1.S6Service) sunkv1.S6ServiceType {
	if s.Type == "" {
		return sunkv1.S6Longrun
	}
	return s.Type
}

// S6ServicesVolume mounts the services ConfigMap as one directory per service, the layout
// sunk-entrypoint expects (S6ServicesDir/<name>/{run,type}).
func S6ServicesVolume(volume, configMap string, services []sunkv1.S6Service) (corev1.Volume, bool) {
	if len(services) == 0 {
		return corev1.Volume{}, false
	}
	var items []corev1.KeyToPath
	for _, s := range services {
		items = append(items,
			corev1.KeyToPath{Key: s.Name + ".run", Path: s.Name + "/run", Mode: ptr.To(int32(0o755))},
			corev1.KeyToPath{Key: s.Name + ".type", Path: s.Name + "/type"})
	}
	return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Items: items, DefaultMode: ptr.To(int32(0o444))}}}, true
}

// S6ServicesHash changes when the services change, so that pods restart to pick them up
// (s6 reads its scan directory at start).
func S6ServicesHash(services []sunkv1.S6Service) string {
	if len(services) == 0 {
		return ""
	}
	m := map[string]string{}
	for _, s := range services {
		m[s.Name] = string(s6Type(s)) + "\x00" + s.Run
	}
	return hashOf(m, nil)
}
