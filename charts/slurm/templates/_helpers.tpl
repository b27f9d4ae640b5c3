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

{{/* The sssd.conf the chart writes into <name>-sssd: login.sssd.config, or with directory.enabled
one for the chart's directory. Empty: the chart writes none. */}}
{{- define "slurm.sssdConf" -}}
{{- $v := .Values -}}
{{- if $v.directory.enabled -}}
{{- if or $v.login.sssd.config $v.login.sssd.configSecretRef -}}
{{- fail "directory.enabled: the chart writes sssd.conf for its directory; leave login.sssd.config and login.sssd.configSecretRef empty" -}}
{{- end -}}
[sssd]
services = nss, pam, ssh
domains = directory

[domain/directory]
id_provider = ldap
auth_provider = none
ldap_uri = ldap://{{ include "slurm.name" . }}-directory.{{ .Release.Namespace }}.svc
ldap_search_base = {{ $v.directory.suffix }}
ldap_schema = rfc2307
ldap_id_use_start_tls = false
offline_timeout = 5
offline_timeout_max = 30
offline_timeout_random_offset = 0
{{- else -}}
{{- $v.login.sssd.config -}}
{{- end -}}
{{- end -}}
