{{/*
Labels Helm's conventions add to every object; deploy/helm_test.go drops
exactly these (and the helm.sh/ annotations) when it compares the chart
with the kustomize manifests.
*/}}
{{- define "bindery.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The image every container runs. The tag goes through toString: --set
image.tag=12 gives a number, which hasPrefix refuses.
*/}}
{{- define "bindery.image" -}}
{{- $tag := toString .Values.image.tag -}}
{{- if hasPrefix "@" $tag -}}
{{ .Values.image.repository }}{{ $tag }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* image and imagePullPolicy of a container, at its indentation. */}}
{{- define "bindery.imageFields" -}}
image: {{ include "bindery.image" . }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{/* DATABASE_URL from the operator's Secret. */}}
{{- define "bindery.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.secretName }}
      key: {{ .Values.database.key }}
{{- end -}}

{{/*
The name kustomize's configMapGenerator gives a ConfigMap: its name, a dash
and a hash (sigs.k8s.io/kustomize/api/hasher: the first 10 hex digits of
the SHA-256 of the JSON of its kind, name and data, with 0, 1, 3, a and e
replaced so that no word forms). kustomize looks the name up under a key
that no object has ("metadata/name" as one field), so the name it hashes
is always empty; the drift test notices if that ever changes. The same name as `kubectl apply -k`
gives, so that changing the data rolls the DaemonSet, as there.
Call with (list NAME DATA).
*/}}
{{- define "bindery.generatedName" -}}
{{- $name := index . 0 -}}
{{- $data := index . 1 -}}
{{- $hex := dict "data" $data "kind" "ConfigMap" "name" "" | toJson | sha256sum | trunc 10 -}}
{{- $enc := $hex | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{ $name }}-{{ $enc }}
{{- end -}}

{{/* The node agent's two ConfigMaps' data. */}}
{{- define "bindery.nodeagentConfigData" -}}
{{- $config := .Values.nodeAgent.config | default (.Files.Get "nodeagent.yaml") -}}
{{- dict "nodeagent.yaml" $config | toJson -}}
{{- end -}}
{{- define "bindery.cniConfigData" -}}
{{- dict "managed-cidrs" (join "," .Values.nodeAgent.cni.managedCIDRs) | toJson -}}
{{- end -}}
