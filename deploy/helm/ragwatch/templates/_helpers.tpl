{{- define "ragwatch.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ragwatch.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ragwatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
GOMEMLIMIT from a resources block's limits.memory (Mi or Gi), as an env entry: the limit less
48 MiB, at most 90% and at least half of it, as ragwatch derives it from the cgroup itself
(memlimit.GoLimit). At 100% the GC only works hard once the container is at its limit; the
48 MiB are what the Go runtime does not count (the binary's pages, the join's off-heap table).
Any other unit renders nothing, and ragwatch then derives it from the cgroup's limit.
*/}}
{{- define "ragwatch.gomemlimit" -}}
{{- $m := toString ((.limits | default dict).memory | default "") -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $m -}}{{- $mib = mul (trimSuffix "Gi" $m | int) 1024 -}}
{{- else if hasSuffix "Mi" $m -}}{{- $mib = trimSuffix "Mi" $m | int -}}
{{- end -}}
{{- if gt (int $mib) 0 -}}
{{- $go := div (mul $mib 9) 10 -}}
{{- if lt (sub $mib 48) $go -}}{{- $go = sub $mib 48 -}}{{- end -}}
{{- if lt $go (div $mib 2) -}}{{- $go = div $mib 2 -}}{{- end -}}
- {name: GOMEMLIMIT, value: {{ $go }}MiB}
{{- end -}}
{{- end -}}

{{/* The Secret holding the app's password for the embedded NATS server (key app-password). */}}
{{- define "ragwatch.natsSecret" -}}
{{ .Values.natsSecret.name | default (printf "%s-nats" (include "ragwatch.fullname" .)) }}
{{- end -}}

{{/* The app container's env for publishing on the embedded NATS server. */}}
{{- define "ragwatch.appNATSEnv" -}}
- name: NATS_URL
  value: nats://127.0.0.1:4222
- name: NATS_USER
  value: {{ .Values.config.nats.embedded.users.app.name | quote }}
- name: NATS_PASSWORD
  valueFrom:
    secretKeyRef: {name: {{ include "ragwatch.natsSecret" . }}, key: app-password}
{{- end -}}

{{/* The ragwatch sidecar container: include it in any pod spec's containers list. */}}
{{- define "ragwatch.sidecar" -}}
- name: ragwatch
  image: {{ include "ragwatch.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["run", "-c", "/etc/ragwatch/ragwatch.yaml", "--log-format", "json", "--shutdown-timeout", {{ .Values.shutdownTimeout | quote }}]
  ports:
    - {name: ragwatch-http, containerPort: 9464}
    - {name: otlp-grpc, containerPort: 4317}
    - {name: otlp-http, containerPort: 4318}
  env:
  {{- include "ragwatch.gomemlimit" .Values.resources | nindent 4 }}
    - name: RAGWATCH_NATS_APP_PASSWORD
      valueFrom:
        secretKeyRef: {name: {{ include "ragwatch.natsSecret" . }}, key: app-password}
  {{- if .Values.secretName }}
  envFrom:
    - secretRef: {name: {{ .Values.secretName }}}
  {{- end }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  {{- /* /readyz fails only while the receivers do not listen: NATS and storage are reported in its body (docs/deploy.md). */}}
  livenessProbe:
    httpGet: {path: /healthz, port: ragwatch-http}
  readinessProbe:
    httpGet: {path: /readyz, port: ragwatch-http}
  securityContext:
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities: {drop: [ALL]}
  volumeMounts:
    - {name: ragwatch-config, mountPath: /etc/ragwatch, readOnly: true}
    - {name: ragwatch-data, mountPath: /var/lib/ragwatch}
{{- end -}}

{{/* Volumes the sidecar needs: include in the pod spec's volumes list. */}}
{{- define "ragwatch.volumes" -}}
- name: ragwatch-config
  configMap: {name: {{ include "ragwatch.fullname" . }}-config}
- name: ragwatch-data
  emptyDir: {sizeLimit: 512Mi}
{{- end -}}
