{{/*
The namespace of every namespaced object. Fixed: the generated CRDs' conversion webhook,
the serving certificate's names and the webhooks' namespace exclusions all name it.
*/}}
{{- define "kuota.namespace" -}}
kuota-system
{{- end }}

{{/* Labels of an object; the argument is a list: root context, component ("" for none). */}}
{{- define "kuota.labels" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
app.kubernetes.io/name: kuota
{{- with $component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: kuota
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
{{- end }}

{{/* Pod selector of a component: the kustomize base's, so an install can move between them. */}}
{{- define "kuota.selector" -}}
app.kubernetes.io/name: kuota
app.kubernetes.io/component: {{ . }}
{{- end }}

{{- define "kuota.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "kuota.certManager" -}}
{{- eq .Values.certificates.mode "cert-manager" -}}
{{- end }}

{{/* The annotation that has cert-manager's CA injector write an object's caBundle. */}}
{{- define "kuota.injectCAFrom" -}}
cert-manager.io/inject-ca-from: {{ include "kuota.namespace" . }}/kuota-webhook
{{- end }}

{{/*
The job frameworks kuota runs end to end (integrations::run_frameworks, checked by
tests/manifests.rs): their API and webhook paths (as Kueue registers them). `unlabelled`: whether jobs without a queue-name label get webhooks in namespaces
labelled kuota.dev/managed=true; `kubelet`: whether kubelet writes are excluded.
*/}}
{{- define "kuota.frameworks" -}}
- framework: batch/job
  short: job
  group: batch
  version: v1
  resource: jobs
  path: batch-v1-job
  unlabelled: true
- framework: jobset.x-k8s.io/jobset
  short: jobset
  group: jobset.x-k8s.io
  version: v1alpha2
  resource: jobsets
  path: jobset-x-k8s-io-v1alpha2-jobset
  unlabelled: true
- framework: kubeflow.org/pytorchjob
  short: pytorchjob
  group: kubeflow.org
  version: v1
  resource: pytorchjobs
  path: kubeflow-org-v1-pytorchjob
  unlabelled: true
- framework: kubeflow.org/mpijob
  short: mpijob
  group: kubeflow.org
  version: v2beta1
  resource: mpijobs
  path: kubeflow-org-v2beta1-mpijob
  unlabelled: true
- framework: trainer.kubeflow.org/trainjob
  short: trainjob
  group: trainer.kubeflow.org
  version: v1alpha1
  resource: trainjobs
  path: trainer-kubeflow-org-v1alpha1-trainjob
  unlabelled: true
- framework: ray.io/rayjob
  short: rayjob
  group: ray.io
  version: v1
  resource: rayjobs
  path: ray-io-v1-rayjob
  unlabelled: true
- framework: ray.io/raycluster
  short: raycluster
  group: ray.io
  version: v1
  resource: rayclusters
  path: ray-io-v1-raycluster
  unlabelled: true
- framework: leaderworkerset.x-k8s.io/leaderworkerset
  short: leaderworkerset
  group: leaderworkerset.x-k8s.io
  version: v1
  resource: leaderworkersets
  path: leaderworkerset-x-k8s-io-v1-leaderworkerset
  unlabelled: true
- framework: pod
  short: pod
  group: ""
  version: v1
  resource: pods
  path: -v1-pod
  unlabelled: false
  kubelet: true
{{- end }}

{{/*
The enabled frameworks' entries of "kuota.frameworks", in that table's order, as a YAML
list; fails on a name kuota does not integrate (values.schema.json names the valid ones
too, this keeps `--disable-openapi-validation` honest).
*/}}
{{- define "kuota.enabledFrameworks" -}}
{{- $all := include "kuota.frameworks" . | fromYamlArray -}}
{{- $known := list -}}
{{- range $all }}{{ $known = append $known .framework }}{{ end -}}
{{- range .Values.integrations.frameworks }}
{{- if not (has . $known) }}
{{- fail (printf "integrations.frameworks: %q is not a framework kuota integrates (valid: %s)" . (join ", " $known)) }}
{{- end }}
{{- end }}
{{- $enabled := list -}}
{{- range $all }}
{{- if has .framework $.Values.integrations.frameworks }}{{ $enabled = append $enabled . }}{{ end }}
{{- end }}
{{- toYaml $enabled }}
{{- end }}

{{/*
One admission webhook entry. Argument: dict with root, name, path, rules (list of
apiGroups/apiVersions/operations/resources), mutating, and for jobs `scope`
("labelled" or "unlabelled") and `kubelet`.
Every entry: sideEffects None (reviews read only the in-memory index), timeoutSeconds 3
(kuota answers within --request-timeout=2s first), failurePolicy Fail.
*/}}
{{- define "kuota.webhookEntry" -}}
- name: {{ .name }}
  admissionReviewVersions: ["v1"]
  sideEffects: None
  {{- if eq (.scope | default "") "policy" }}
  # Ignore: with kuota down these jobs pass unpoliced, as before this entry existed.
  failurePolicy: Ignore
  {{- else }}
  failurePolicy: Fail
  {{- end }}
  timeoutSeconds: 3
  matchPolicy: Equivalent
  {{- if .mutating }}
  reinvocationPolicy: IfNeeded
  {{- end }}
  clientConfig:
    service:
      name: kuota-webhook
      namespace: {{ include "kuota.namespace" .root }}
      port: 443
      path: {{ .path }}
  rules:
    {{- toYaml .rules | nindent 4 }}
  {{- with .scope }}
  namespaceSelector:
    {{- if eq . "unlabelled" }}
    matchLabels:
      kuota.dev/managed: "true"
    {{- end }}
    # kuota never blocks its own recovery or the control plane's.
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: NotIn
        values: ["kube-system", {{ include "kuota.namespace" $.root | quote }}]
      {{- if eq . "policy" }}
      - key: kuota.dev/managed
        operator: NotIn
        values: ["true"]
      {{- end }}
  objectSelector:
    matchExpressions:
      - key: kueue.x-k8s.io/queue-name
        operator: {{ if eq . "labelled" }}Exists{{ else }}DoesNotExist{{ end }}
  {{- end }}
  {{- if .kubelet }}
  matchConditions:
    # Mirror pods and other kubelet writes are never kuota's business.
    - name: exclude-kubelet-requests
      expression: '!("system:nodes" in request.userInfo.groups)'
  {{- end }}
{{- end }}

{{/*
The webhook entries of the enabled job frameworks. Argument: dict root, mutating.
*/}}
{{- define "kuota.jobWebhooks" -}}
{{- $root := .root -}}
{{- $mutating := .mutating -}}
{{- $prefix := ternary "m" "v" $mutating -}}
{{- $verb := ternary "mutate" "validate" $mutating -}}
{{- $ops := ternary (list "CREATE") (list "CREATE" "UPDATE") $mutating -}}
{{- range include "kuota.enabledFrameworks" $root | fromYamlArray }}
{{- $rules := list (dict "apiGroups" (list .group) "apiVersions" (list .version) "operations" $ops "resources" (list .resource)) }}
{{- $path := printf "/%s-%s" $verb .path }}
{{ include "kuota.webhookEntry" (dict "root" $root "name" (printf "%s%s.kb.io" $prefix .short) "path" $path "rules" $rules "mutating" $mutating "scope" "labelled" "kubelet" .kubelet) }}
{{- if .unlabelled }}
{{ include "kuota.webhookEntry" (dict "root" $root "name" (printf "%s%s-unlabelled.kuota.dev" $prefix .short) "path" $path "rules" $rules "mutating" $mutating "scope" "unlabelled" "kubelet" .kubelet) }}
{{ include "kuota.webhookEntry" (dict "root" $root "name" (printf "%s%s-policy.kuota.dev" $prefix .short) "path" $path "rules" $rules "mutating" $mutating "scope" "policy" "kubelet" .kubelet) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The webhook entries of kuota's own kinds. Argument: dict root, mutating, kinds (singular, plural, extra resources). */}}
{{- define "kuota.kueueWebhooks" -}}
{{- $root := .root -}}
{{- $mutating := .mutating -}}
{{- $prefix := ternary "m" "v" $mutating -}}
{{- $verb := ternary "mutate" "validate" $mutating -}}
{{- $ops := ternary (list "CREATE") (list "CREATE" "UPDATE") $mutating -}}
{{- range .kinds }}
{{- $rules := list (dict "apiGroups" (list "kueue.x-k8s.io") "apiVersions" (list "v1beta2") "operations" $ops "resources" .resources) }}
{{ include "kuota.webhookEntry" (dict "root" $root "name" (printf "%s%s.kb.io" $prefix .kind) "path" (printf "/%s-kueue-x-k8s-io-v1beta2-%s" $verb .kind) "rules" $rules "mutating" $mutating) }}
{{- end }}
{{- end }}

{{/* Pod security of both Deployments: the "restricted" Pod Security Standard and more. */}}
{{- define "kuota.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
# The cert Secret's files are group-readable by this gid (defaultMode 0440).
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "kuota.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end }}
