{{/*
quotakeeper.systemNamespace: the system namespace, the release's unless set.
*/}}
{{- define "quotakeeper.systemNamespace" -}}
{{- default .Release.Namespace .Values.systemNamespace -}}
{{- end -}}

{{/*
quotakeeper.file renders a file of files/ (generated from config/ by `make
generate`) as it is, with one change: every "namespace: <from>" line names
<to> instead, so objects and the subjects and Services they name move with
the release. .Files.Get does not expand template actions, so nothing else
of the file changes. Argument: (list $ "files/x.yaml" "<from>" "<to>").
*/}}
{{- define "quotakeeper.file" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $content := $root.Files.Get $file -}}
{{- if not $content }}{{ fail (printf "%s is missing: run make generate" $file) }}{{ end -}}
{{- regexReplaceAll (printf "(?m)^(\\s*-?\\s*)namespace: %s$" (index . 2)) $content (printf "${1}namespace: %s" (index . 3)) -}}
{{- end -}}

{{- define "quotakeeper.image" -}}
{{- printf "%s:%s" .Values.manager.image.repository (default .Chart.AppVersion .Values.manager.image.tag) -}}
{{- end -}}

{{/*
quotakeeper.labels: the labels of the objects the chart writes itself
(not those copied from config/).
*/}}
{{- define "quotakeeper.labels" -}}
app.kubernetes.io/name: quotakeeper
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.manager.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
quotakeeper.podScheduling: the scheduling fields the manager's pods and the
hook Job's pod share (priority, pull secrets, node selection).
*/}}
{{- define "quotakeeper.podScheduling" -}}
{{- with .Values.manager.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.manager.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.manager.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
