{{/* The SlurmCluster's name: nameOverride, or the release name. */}}
{{- define "slurm.name" -}}
{{- default .Release.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "slurm.labels" -}}
app.kubernetes.io/name: slurm
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* A Secret the chart makes from an inline value: (dict "root" $ "suffix" "sssd" "key" "sssd.conf" "value" STR). */}}
{{- define "slurm.secret" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "slurm.name" .root }}-{{ .suffix }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "slurm.labels" .root | nindent 4 }}
type: Opaque
stringData:
  {{ .key }}: |
    {{- .value | trimSuffix "\n" | nindent 4 }}
{{- end -}}

{{/* A StorageSpec (size, storageClassName) without empty fields. */}}
{{- define "slurm.storage" -}}
size: {{ .size | default "1Gi" }}
{{- with .storageClassName }}
storageClassName: {{ . }}
{{- end }}
{{- end -}}
