#!/usr/bin/env bash
# Copies into charts/quotakeeper what the chart ships of config/ and
# templates/, so the chart and `kubectl apply -k` install the same objects
# (`make generate`; `make verify` fails when a copy is stale):
#   files/crds/               config/crd, verbatim (templates/crds.yaml
#                             renders them, so helm upgrade updates them)
#   files/rbac.yaml           `kubectl kustomize config/rbac`
#   files/webhook.yaml        `kubectl kustomize config/webhook`
#   files/gatekeeper/         config/gatekeeper/rbac.yaml and syncset.yaml
#   files/constrainttemplates templates/<name>/template.yaml as <name>.yaml
#   files/constrainttemplates-externaldata
#                             templates/<name>/template-externaldata.yaml as <name>.yaml
#   files/samples/            config/samples, less 30-syncset.yaml (the
#                             chart renders the SyncSet itself)
#   files/prometheus/         config/prometheus/prometheusrule.yaml and
#                             grafana-dashboard.json
# The chart's templates read files/ with .Files.Get, which does not expand
# template actions: Rego and CEL reach the cluster byte for byte. Only
# namespaces are rewritten there (templates/_helpers.tpl).
set -euo pipefail
cd "$(dirname "$0")/../.."
chart=charts/quotakeeper
rm -rf "$chart/crds" "$chart/files"
mkdir -p "$chart/files/crds" "$chart/files/gatekeeper" "$chart/files/constrainttemplates" "$chart/files/constrainttemplates-externaldata" "$chart/files/samples" "$chart/files/prometheus"
cp config/crd/quota.miloapis.com_*.yaml "$chart/files/crds/"
cp config/prometheus/prometheusrule.yaml config/prometheus/grafana-dashboard.json "$chart/files/prometheus/"
kubectl kustomize config/rbac > "$chart/files/rbac.yaml"
kubectl kustomize config/webhook > "$chart/files/webhook.yaml"
cp config/gatekeeper/rbac.yaml config/gatekeeper/syncset.yaml "$chart/files/gatekeeper/"
for t in templates/*/template.yaml; do
	name=$(basename "$(dirname "$t")")
	cp "$t" "$chart/files/constrainttemplates/$name.yaml"
	cp "$(dirname "$t")/template-externaldata.yaml" "$chart/files/constrainttemplates-externaldata/$name.yaml"
done
for s in config/samples/*.yaml; do
	[ "$(basename "$s")" = 30-syncset.yaml ] || cp "$s" "$chart/files/samples/"
done
