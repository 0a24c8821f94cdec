{{/* The name of every object: the release's. */}}
{{- define "abi-engine.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "abi-engine.selectorLabels" -}}
app.kubernetes.io/name: abi-engine
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "abi-engine.labels" -}}
{{ include "abi-engine.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "abi-engine.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/* The configuration file, with http.listen where the kubelet reaches it. */}}
{{- define "abi-engine.config" -}}
{{- $http := dict "http" (dict "listen" "0.0.0.0:8080") -}}
{{- toYaml (mergeOverwrite (deepCopy .Values.config) $http) -}}
{{- end -}}

{{/*
The rollout id: the image tag and the configuration's digest, so that a deploy that
changes either gets a new one (a label value: at most 63 characters).
*/}}
{{- define "abi-engine.rollout" -}}
{{- printf "%s-%s" (include "abi-engine.tag" . | trunc 52 | trimSuffix "-") (include "abi-engine.config" . | sha256sum | trunc 10) -}}
{{- end -}}
