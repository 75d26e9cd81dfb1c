#!/usr/bin/env bash
# Checks the monitoring files under docker/: the Prometheus configuration, the alert rules and their
# unit tests (promtool), the Compose file (docker-compose config, no Docker daemon needed) and the
# Grafana dashboard (valid JSON).
# Installs Debian's `prometheus` (promtool + the server used by tests/broker/prometheus_scrape.rs) and
# `docker-compose` when they are missing. Idempotent; called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/prometheus ] || command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
  # Unique names (prometheus may be listed twice).
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  echo "check_prometheus: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  # The package's own service is not wanted here (and there is no init system in a container).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
fi

echo "check_prometheus: $(promtool --version 2>&1 | head -n1)" >&2
promtool check config docker/prometheus.yml
promtool check rules docker/alerts.yml
promtool test rules docker/alerts.test.yml
# Interpolation, schema and file references of the Compose file; prints nothing when valid.
docker-compose -f docker/docker-compose.yml config -q
# Grafana's provisioned dashboard must at least be JSON (tests/broker/prometheus_scrape.rs runs its
# queries against a real Prometheus).
for f in docker/grafana/dashboards/*.json; do
  python3 -m json.tool "$f" >/dev/null
done
echo "check_prometheus: docker/prometheus.yml, docker/alerts.yml (+ tests), docker/docker-compose.yml and the Grafana dashboard OK" >&2
