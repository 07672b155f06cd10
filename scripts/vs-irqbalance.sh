#!/usr/bin/env bash
# Side by side: irqpilot's placement and Debian's irqbalance on the same simulated machine.
#
#   scripts/vs-irqbalance.sh [--scale S] [--interval SECS] [--policy P] [SCENARIO ...]
#
# For each scenario (default: every built-in placement scenario and its -lowload twin):
#   1. irqpilot: `irqpilot sim SCENARIO --set placement=irqpilot` (its placement policy through
#      the production control loop on SimPlatform);
#   2. irqbalance: `irqpilot sim SCENARIO --export-root DIR --realtime S` keeps a live
#      /proc + /sys tree of the simulated machine, simulated
#      time following wall time at S simulated seconds per wall second (default 0.2: the
#      built-in scenarios compress time 5x, irqpilot's 1 s period included, so one second of
#      irqbalance's wall clock is 200 ms of the machine), and the unmodified irqbalance
#      (`--foreground -t SECS`, default 1 s, its shortest interval) runs in a private mount
#      namespace where /proc and /sys show that tree. Its writes to /proc/irq/N/smp_affinity go
#      into the tree; the twin takes them as the kernel would.
# Then it prints one table: throughput, transactions/s, p99 latency, max and mean CPU load,
# interrupts on isolated CPUs, and IRQ moves in the measured interval.
#
# Safety: irqbalance never sees this machine's IRQs. /proc is replaced (in its namespace only)
# by a directory of symbolic links into a read-only bind mount of the real /proc, except
# interrupts, stat, softirqs, irq and cmdline, which point into the tree; /sys is the tree's.
# The real /proc/irq/*/smp_affinity{,_list} and default_smp_affinity are recorded before and
# compared after: any change fails the script loudly. Only processes this script started are
# stopped (by pid); the namespace's mounts are unmounted by its own helper before it exits.
set -euo pipefail

# ---- inside the private mount namespace --------------------------------------------------
if [[ "${1:-}" == "--inner" ]]; then
    tree=$2 ns=$3
    shift 3
    mkdir -p "$ns/realproc" "$ns/proc"
    mount --bind /proc "$ns/realproc"
    mount -o remount,bind,ro "$ns/realproc"
    for e in /proc/*; do
        b=${e##*/}
        case $b in interrupts | stat | softirqs | irq | cmdline) continue ;; esac
        ln -s "$ns/realproc/$b" "$ns/proc/$b"
    done
    for b in interrupts stat softirqs irq cmdline; do
        [[ -e "$tree/proc/$b" ]] && ln -s "$tree/proc/$b" "$ns/proc/$b"
    done
    mount --bind "$ns/proc" /proc
    mount --bind "$tree/sys" /sys
    # From here on /proc/irq and /sys are the twin's. Check before starting irqbalance.
    [[ "$(readlink /proc/irq)" == "$tree/proc/irq" ]] || { echo "inner: /proc/irq is not the tree's" >&2; exit 3; }
    [[ -e /sys/devices/system/cpu/online && ! -e /sys/kernel/mm ]] || { echo "inner: /sys is not the tree's" >&2; exit 3; }
    "$@" &
    child=$!
    cleanup_inner() {
        kill "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
        umount /sys /proc 2>/dev/null || true
        umount "$ns/realproc" 2>/dev/null || true
    }
    trap 'cleanup_inner; exit 0' TERM INT
    wait "$child" || true
    cleanup_inner
    exit 0
fi

# ---- outside -------------------------------------------------------------------------------
scale=0.2
interval=1
policy=irqpilot
scenarios=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --scale) scale=$2; shift 2 ;;
        --interval) interval=$2; shift 2 ;;
        --policy) policy=$2; shift 2 ;;
        -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
        *) scenarios+=("$1"); shift ;;
    esac
done
if [[ ${#scenarios[@]} -eq 0 ]]; then
    scenarios=(balance-p4-4nic-netperf balance-p4-4nic-netperf-lowload
        isolation-rt-24cpu isolation-rt-24cpu-lowload
        numa-remote-2node numa-remote-2node-lowload
        placement-churn-8q placement-churn-8q-lowload)
fi

die() { echo "vs-irqbalance: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "needs root (unshare -m and bind mounts)"
command -v unshare >/dev/null || die "unshare (util-linux) is missing"
command -v python3 >/dev/null || die "python3 is missing"
if ! command -v irqbalance >/dev/null; then
    echo "vs-irqbalance: installing irqbalance (Debian package)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends irqbalance >/dev/null \
        || die "apt-get install irqbalance failed"
fi
irqbalance_bin=$(command -v irqbalance)

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
cargo build --release --quiet -p irqpilot
irqpilot=${CARGO_TARGET_DIR:-$repo/target}/release/irqpilot

work=$(mktemp -d /tmp/vs-irqbalance.XXXXXX)
started=()
real_irq_state() {
    for f in /proc/irq/default_smp_affinity /proc/irq/*/smp_affinity /proc/irq/*/smp_affinity_list; do
        [[ -r $f ]] && printf '%s %s\n' "$f" "$(cat "$f" 2>/dev/null || echo '?')"
    done
}
real_irq_state >"$work/real-before"
check_real() {
    real_irq_state >"$work/real-after"
    if ! diff -u "$work/real-before" "$work/real-after" >"$work/real-diff"; then
        cat "$work/real-diff" >&2
        die "THIS MACHINE'S IRQ AFFINITIES CHANGED during the run (diff above)"
    fi
    if grep -q "$work" /proc/self/mountinfo; then
        die "a mount of $work is visible outside the private namespace"
    fi
}
cleanup() {
    local rc=$?
    for pid in "${started[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    check_real
    if [[ $rc -eq 0 && -z "${KEEP:-}" ]]; then rm -rf "$work"; else echo "vs-irqbalance: logs kept in $work" >&2; fi
}
trap cleanup EXIT

for sc in "${scenarios[@]}"; do
    echo "== $sc" >&2
    "$irqpilot" sim "$sc" --set "placement=$policy" --format json >"$work/$sc.$policy.json"

    tree=$work/$sc.tree ns=$work/$sc.ns
    mkdir -p "$tree" "$ns"
    "$irqpilot" -v sim "$sc" --export-root "$tree" --realtime "$scale" --hold-until "$tree/.go" \
        --set placement=irqbalance --format json \
        >"$work/$sc.irqbalance.json" 2>"$work/$sc.twin.log" &
    twin=$!
    started+=("$twin")
    for _ in $(seq 300); do
        [[ -e "$tree/.irqpilot-twin-ready" ]] && break
        kill -0 "$twin" 2>/dev/null || die "the twin stopped early: $(tail -3 "$work/$sc.twin.log")"
        sleep 0.05
    done
    [[ -e "$tree/.irqpilot-twin-ready" ]] || die "the twin's tree never became ready"
    unshare -m --propagation private "$0" --inner "$tree" "$ns" \
        "$irqbalance_bin" --foreground --debug -t "$interval" >"$work/$sc.irqbalance.log" 2>&1 &
    ib=$!
    started+=("$ib")
    # The machine's clock starts once irqbalance has read the tree (its --debug dump).
    for _ in $(seq 100); do
        grep -q "^Package\|Adding IRQ" "$work/$sc.irqbalance.log" 2>/dev/null && break
        kill -0 "$ib" 2>/dev/null || die "irqbalance exited at start: $(tail -5 "$work/$sc.irqbalance.log")"
        sleep 0.05
    done
    touch "$tree/.go"
    wait "$twin" || die "the twin failed: $(tail -3 "$work/$sc.twin.log")"
    kill -0 "$ib" 2>/dev/null || die "irqbalance exited before the twin finished: $(tail -5 "$work/$sc.irqbalance.log")"
    kill "$ib"
    wait "$ib" 2>/dev/null || true
    check_real
    grep -c "outside write" "$work/$sc.twin.log" | sed "s/^/   irqbalance affinity writes: /" >&2
done

python3 - "$work" "$policy" "${scenarios[@]}" <<'EOF'
import json, sys
work, policy, names = sys.argv[1], sys.argv[2], sys.argv[3:]

def row(name, who):
    r = json.load(open(f"{work}/{name}.{who}.json"))
    cpus = r["per_cpu"]
    load = [c["hardirq_pct"] + c["softirq_pct"] + c["app_pct"] for c in cpus]
    p = r.get("placement") or {}
    iso = p.get("isolated_cpus") or []
    iso_irqs = p.get("isolated_interrupts_per_sec", 0.0)
    lat = r.get("latency_us") or {}
    tput = r.get("transactions_per_sec")
    tput = f"{tput/1000:.1f}K trans/s" if tput is not None else f"{r.get('throughput_gbps', 0):.2f} Gb/s"
    p99 = f"{lat['p99']:.1f}" if "p99" in lat else "-"
    return [name, who, tput, p99, f"{max(load):.1f}",
            f"{sum(load)/len(load):.1f}", f"{iso_irqs:.0f}" if iso else "-", str(r["migrations"])]

head = ["scenario", "placement", "throughput", "p99 us", "max CPU %", "mean CPU %",
        "isolated-CPU irq/s", "migrations"]
rows = [head]
for n in names:
    rows.append(row(n, policy))
    rows.append(row(n, "irqbalance"))
w = [max(len(r[i]) for r in rows) for i in range(len(head))]
print("| " + " | ".join(h.ljust(w[i]) for i, h in enumerate(head)) + " |")
print("|" + "|".join("-" * (x + 2) for x in w) + "|")
for r in rows[1:]:
    print("| " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)) + " |")
EOF
