#!/usr/bin/env bash
# The exporter's cost end to end, over HTTP, on the generated 256-CPU server: CPU time per
# scrape, its background CPU (the inventory re-read every --inventory-interval), its resident
# memory as scrapes go on, and from those its share of one core at a 15 s scrape interval.
#
#   cargo build --release && scripts/bench-exporter.sh [SCRAPES] [PAUSE_S]
#
# Scrapes are PAUSE_S apart (default 1 s: every scrape recomputes rates and findings, as at
# any interval of a second or more). Takes about SCRAPES * (PAUSE_S + the scrape) + 125 s.
set -euo pipefail

cd "$(dirname "$0")/.."
scrapes="${1:-60}"
pause="${2:-1}"
bin=target/release/irqpilot
tmp="$(mktemp -d /dev/shm/irqpilot-bench-XXXXXX)"
pid=""
cleanup() {
    if [ -n "${pid}" ]; then kill "${pid}" 2>/dev/null || true; wait "${pid}" 2>/dev/null || true; fi
    rm -rf "${tmp}"
}
trap cleanup EXIT

"${bin}" fixture generate --preset large-server --out "${tmp}/root" >/dev/null
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"${bin}" --config /dev/null --root "${tmp}/root" exporter --listen "127.0.0.1:${port}" 2>"${tmp}/log" &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:${port}/" >/dev/null && break; sleep 0.1; done

hz="$(getconf CLK_TCK)"
cpu_ms() { awk -v hz="${hz}" '{print ($14 + $15) * 1000 / hz}' "/proc/${pid}/stat"; }
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/${pid}/status"; }
scrape() { curl -sf "http://127.0.0.1:${port}/metrics" >/dev/null; }

for _ in $(seq 5); do scrape; sleep "${pause}"; done
rss_warm="$(rss_kb)"
series="$(curl -sf "http://127.0.0.1:${port}/metrics" | grep -c '^irqpilot_')"
bytes="$(curl -sf "http://127.0.0.1:${port}/metrics" | wc -c)"
c0="$(cpu_ms)"
w0="$(date +%s.%N)"
wall_sum=0
for _ in $(seq "${scrapes}"); do
    t="$(curl -sf -o /dev/null -w '%{time_total}' "http://127.0.0.1:${port}/metrics")"
    wall_sum="$(echo "${wall_sum} + ${t}" | bc -l)"
    sleep "${pause}"
done
c1="$(cpu_ms)"
rss_after="$(rss_kb)"
# Idle: no scrapes for 120 s, which holds two inventory re-reads (every 60 s by default).
sleep 120
c2="$(cpu_ms)"
per_scrape="$(echo "(${c1} - ${c0}) / ${scrapes}" | bc -l)"
idle_per_s="$(echo "(${c2} - ${c1}) / 120" | bc -l)"
share="$(echo "(${per_scrape} / 15 + ${idle_per_s}) / 10" | bc -l)"
printf 'series per scrape          %d (%d bytes)\n' "${series}" "${bytes}"
printf 'wall per scrape (curl)     %.1f ms\n' "$(echo "${wall_sum} * 1000 / ${scrapes}" | bc -l)"
printf 'CPU per scrape             %.2f ms\n' "${per_scrape}"
printf 'CPU between scrapes        %.3f ms/s\n' "${idle_per_s}"
printf 'share of a core at 15 s    %.3f %%\n' "${share}"
printf 'RSS after 5 / %d scrapes   %d / %d kB; peak %d kB\n' "$((scrapes + 5))" "${rss_warm}" "${rss_after}" \
    "$(awk '/^VmHWM/{print $2}' "/proc/${pid}/status")"
