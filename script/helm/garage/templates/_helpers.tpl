{{/* Names and labels shared by the templates. */}}

{{- define "garage.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "garage.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "garage.labels" -}}
{{ include "garage.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "garage.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "garage.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "garage.fullname" .)) -}}
{{- end -}}

{{/* The headless Service giving each pod a DNS name. */}}
{{- define "garage.headless" -}}
{{ include "garage.fullname" . }}-headless
{{- end -}}

{{/* Pod i's RPC address, by its stable DNS name. */}}
{{- define "garage.podRpcAddr" -}}
{{ include "garage.fullname" .root }}-{{ .i }}.{{ include "garage.headless" .root }}:3901
{{- end -}}

{{/* The secrets as environment variables, from the Secret. */}}
{{- define "garage.secretEnv" -}}
- name: GARAGE_RPC_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "garage.secretName" . }}
      key: rpc-secret
- name: GARAGE_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "garage.secretName" . }}
      key: admin-token
- name: GARAGE_METRICS_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "garage.secretName" . }}
      key: metrics-token
{{- end -}}

{{/* Pod and container hardening, as the systemd unit's. */}}
{{- define "garage.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "garage.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The capacity each node is given in the layout ("10Gi" is given as "10G"). */}}
{{- define "garage.capacity" -}}
{{- .Values.layout.capacity | default .Values.persistence.data.size | trimSuffix "i" -}}
{{- end -}}
