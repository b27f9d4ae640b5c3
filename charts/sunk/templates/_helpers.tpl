{{/* The release's base name: <release>, or <release>-sunk when the release name lacks "sunk". */}}
{{- define "sunk.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Selector labels of a component: (dict "root" $ "component" "operator"). */}}
{{- define "sunk.selectorLabels" -}}
app.kubernetes.io/name: {{ default .root.Chart.Name .root.Values.nameOverride }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* All labels of a component's objects. */}}
{{- define "sunk.labels" -}}
{{ include "sunk.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{/* The name of the operator's and the syncer's metrics port: HTTPS with metrics.secure. */}}
{{- define "sunk.metricsPort" -}}
{{- if .Values.metrics.secure }}https-metrics{{ else }}http-metrics{{ end -}}
{{- end -}}

{{/* Object name of a component: <fullname>-<component>. */}}
{{- define "sunk.name" -}}
{{- printf "%s-%s" (include "sunk.fullname" .root) .component -}}
{{- end -}}

{{/*
The objects every controller has: ServiceAccount, a ClusterRole with the given rules and its
binding, a Role for leader election in the release namespace, the metrics Service and the
Deployment. (dict "root" $ "component" "syncer" "values" .Values.syncer "rules" LIST
"lease" LEADER-ELECTION-ID "args" LIST "ports" LIST "volumes" LIST "volumeMounts" LIST)
*/}}
{{- define "sunk.controller" -}}
{{- $name := include "sunk.name" . -}}
{{- $root := .root -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
rules:
  {{- toYaml .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
---
# Leader election: its one Lease in the release namespace (client-go's lease lock gets,
# creates and updates it; a create cannot be limited to a name), and the events that announce
# the leader.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ required "sunk.controller: lease" .lease }}]
    verbs: [get, update]
  - apiGroups: ["", events.k8s.io]
    resources: [events]
    verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}-leader-election
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}-leader-election
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}-metrics
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
  {{- with $root.Values.metrics.serviceAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: ClusterIP
  selector:
    {{- include "sunk.selectorLabels" . | nindent 4 }}
  ports:
    - name: {{ include "sunk.metricsPort" $root }}
      port: {{ $root.Values.metrics.port }}
      targetPort: {{ include "sunk.metricsPort" $root }}
      protocol: TCP
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "sunk.labels" . | nindent 4 }}
spec:
  replicas: {{ .values.replicas }}
  selector:
    matchLabels:
      {{- include "sunk.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "sunk.labels" . | nindent 8 }}
      {{- with .values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ $name }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: 10
      containers:
        - name: {{ .component }}
          image: "{{ $root.Values.image.repository }}:{{ $root.Values.image.tag }}"
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["/usr/local/bin/sunk-{{ .component }}"]
          args:
            - --metrics-bind-address=:{{ $root.Values.metrics.port }}
            - --metrics-secure={{ $root.Values.metrics.secure }}
            - --health-probe-bind-address=:8081
            - --leader-elect={{ .values.leaderElection }}
            {{- with $root.Values.leaderElectionTimings }}
            - --leader-elect-lease-duration={{ .leaseDuration }}
            - --leader-elect-renew-deadline={{ .renewDeadline }}
            - --leader-elect-retry-period={{ .retryPeriod }}
            {{- end }}
            {{- range .args }}
            - {{ . }}
            {{- end }}
            {{- range .values.extraArgs }}
            - {{ . }}
            {{- end }}
          ports:
            - name: {{ include "sunk.metricsPort" $root }}
              containerPort: {{ $root.Values.metrics.port }}
              protocol: TCP
            - name: health
              containerPort: 8081
              protocol: TCP
            {{- with .ports }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          # A 5 s timeout, not kubelet's 1 s: the answer is a constant, and a busy node
          # that delays it three times in a row must not restart a healthy controller.
          livenessProbe:
            httpGet: {path: /healthz, port: health}
            initialDelaySeconds: 5
            periodSeconds: 10
            timeoutSeconds: 5
          readinessProbe:
            httpGet: {path: /readyz, port: health}
            periodSeconds: 5
            timeoutSeconds: 5
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          {{- with .volumeMounts }}
          volumeMounts:
            {{- toYaml . | nindent 12 }}
          {{- end }}
      {{- with .volumes }}
      volumes:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/*
sunk-scheduler's KubeSchedulerConfiguration (docs/scheduler.md): one profile, sunk-scheduler,
for the SlurmCluster scheduler.cluster. (dict "root" $ "ns" NAMESPACE "name" OBJECT-NAME)
*/}}
{{- define "sunk.schedulerConfig" -}}
{{- $v := .root.Values.scheduler -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
# Filter must see every node (the plugin excludes from the job the Slurm nodes on nodes it did not see).
percentageOfNodesToScore: 100
leaderElection:
  leaderElect: {{ $v.leaderElection }}
  resourceLock: leases
  resourceNamespace: {{ .own }}
  resourceName: {{ .name }}
profiles:
  - schedulerName: sunk-scheduler
    plugins:
      preEnqueue: {enabled: [{name: SunkSlurm}]}
      preFilter: {enabled: [{name: SunkSlurm}]}
      filter: {enabled: [{name: SunkSlurm}]}
      reserve: {enabled: [{name: SunkSlurm}]}
      permit: {enabled: [{name: SunkSlurm}]}
      preBind: {enabled: [{name: SunkSlurm}]}
      postBind: {enabled: [{name: SunkSlurm}]}
      bind: {enabled: [{name: SunkSlurm}], disabled: [{name: DefaultBinder}]}
    pluginConfig:
      - name: SunkSlurm
        args:
          {{- $scheme := ternary "https" "http" $v.tls }}
          slurmURL: {{ $scheme }}://{{ $v.cluster.name }}-restapi.{{ .ns }}.svc:6820
          {{- if $v.nodeWatcher }}
          nodeWatcherURL: {{ $scheme }}://{{ $v.cluster.name }}-nodewatch.{{ .ns }}.svc:6830
          {{- end }}
          {{- if $v.tls }}
          caSecret: {{ $v.cluster.name }}-tls
          {{- end }}
          jwtKeySecret: {{ $v.cluster.name }}-jwt-key
          markKeyFile: /etc/sunk/mark/mark.key
          slurmUser: {{ $v.slurmUser }}
          cluster: {{ $v.cluster.name }}
          namespace: {{ .ns }}
          pollInterval: {{ $v.pollInterval }}
          gangTimeout: {{ $v.gangTimeout }}
{{- end -}}
