#!/usr/bin/env bash
# End-to-end check of irqpilot's moderation actuators against real drivers, in a QEMU VM.
#
#   sudo scripts/vm-check.sh [--keep]
#
# Boots a throw-away VM (Debian's linux-image-amd64 kernel, a busybox initramfs built here) with
# an emulated Intel 82545EM NIC (driver e1000, user-mode networking) and an NVMe controller backed by a small raw
# file, and runs irqpilot's own binary inside it:
#   1. `irqpilot status` (must list the e1000 NIC and the NVMe controller with their queues);
#   2. with ping and O_DIRECT reads loading both devices, `irqpilot moderate --plan`, then
#      `--apply`, under a [moderation] target low enough that both devices must be moderated;
#   3. independent read-back with `ethtool -c eth0` and `nvme get-feature -f 8 / -f 9`;
#   4. `irqpilot revert`, read-back again;
#   5. a direct `nvme set-feature -f 8` probe, so the controller's own answer is on record.
# The host parses the serial console and prints a PASS/FAIL table; exit 1 on any mismatch, 2 when
# the VM could not be built or booted.
#
# Safety: nothing runs against this machine's interrupts or interfaces; every ethtool, nvme and
# irqpilot command runs inside the guest. Missing packages are installed with apt-get (the kernel
# package only adds files under /boot and /lib/modules; the running kernel is not changed). Only
# the QEMU process this script starts is stopped (by pid); its temp dir is removed (--keep keeps
# it). Environment: IRQPILOT_BIN (use this binary, skip the build), VM_CHECK_TIMEOUT (seconds,
# default 600), VM_CHECK_ACCEL (kvm or tcg; default kvm when /dev/kvm works).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keep=0
[[ "${1:-}" == "--keep" ]] && keep=1
[[ "${1:-}" == "-h" || "${1:-}" == "--help" ]] && { sed -n '2,24p' "$0"; exit 0; }
timeout_s=${VM_CHECK_TIMEOUT:-600}
started=$(date +%s)

die() { echo "vm-check: $*" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || die "needs root (apt-get, /dev/kvm, building an initramfs with device nodes)"

# ---- packages ---------------------------------------------------------------------------------
pkgs=(qemu-system-x86 linux-image-amd64 busybox-static cpio xz-utils zstd kmod ethtool nvme-cli jq)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "vm-check: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- the binary under test --------------------------------------------------------------------
bin=${IRQPILOT_BIN:-}
if [[ -z "$bin" ]]; then
    target=${CARGO_TARGET_DIR:-$repo/target}
    if command -v cargo >/dev/null; then
        (cd "$repo" && cargo build --release --locked -p irqpilot)
    fi
    bin=$target/release/irqpilot
fi
[[ -x "$bin" ]] || die "no irqpilot binary at $bin (build it, or set IRQPILOT_BIN)"

# ---- guest kernel: the newest packaged kernel that has the drivers as modules ------------------
kver=
for v in $(ls /lib/modules | sort -rV); do
    if [[ -f /boot/vmlinuz-$v && -f /lib/modules/$v/modules.dep ]] &&
        modprobe -S "$v" --show-depends e1000 >/dev/null 2>&1; then
        kver=$v
        break
    fi
done
[[ -n "$kver" ]] || die "no /boot/vmlinuz-<ver> with e1000 in /lib/modules/<ver> (apt-get install linux-image-amd64)"

# ---- initramfs --------------------------------------------------------------------------------
work=$(mktemp -d /tmp/irqpilot-vm.XXXXXX)
qemu_pid=
cleanup() {
    if [[ -n "$qemu_pid" ]] && kill -0 "$qemu_pid" 2>/dev/null; then
        kill "$qemu_pid" 2>/dev/null || true
        wait "$qemu_pid" 2>/dev/null || true
    fi
    if [[ $keep -eq 1 ]]; then echo "vm-check: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rootfs=$work/rootfs
mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc/irqpilot,var/lib/irqpilot,lib/modules}
cp /bin/busybox "$rootfs/bin/busybox"
for applet in $("$rootfs/bin/busybox" --list); do
    [[ -e "$rootfs/bin/$applet" ]] || ln -s busybox "$rootfs/bin/$applet"
done

# A dynamically linked binary and every library ldd lists (loader included), at the same paths.
copy_with_libs() {
    local src=$1 dst=$2
    cp -L "$src" "$rootfs$dst"
    local lib
    for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*' | sort -u); do
        [[ -e "$rootfs$lib" ]] || cp -L --parents "$lib" "$rootfs"
    done
}
copy_with_libs "$bin" /usr/bin/irqpilot
copy_with_libs "$(command -v ethtool)" /usr/sbin/ethtool
copy_with_libs "$(command -v nvme)" /usr/sbin/nvme

# Modules in dependency order (modprobe resolves modules.dep), decompressed for busybox insmod.
: >"$rootfs/modules.list"
for m in e1000 nvme; do
    while read -r kind path _; do
        [[ "$kind" == insmod ]] || continue
        name=$(basename "$path")
        name=${name%.xz}
        name=${name%.zst}
        [[ -e "$rootfs/lib/modules/$name" ]] && continue
        case $path in
            *.xz) xz -dc "$path" >"$rootfs/lib/modules/$name" ;;
            *.zst) zstd -qdc "$path" >"$rootfs/lib/modules/$name" ;;
            *) cp "$path" "$rootfs/lib/modules/$name" ;;
        esac
        echo "/lib/modules/$name" >>"$rootfs/modules.list"
    done < <(modprobe -S "$kver" --show-depends "$m")
done

# A target far below what the load makes, so both devices must be moderated; delay_us >= 100 so
# NVMe's 100 us aggregation-time field can express it; GSIM is not in Debian's kernel.
cat >"$rootfs/etc/irqpilot/vm.toml" <<'EOF'
[moderation]
target_intr_rate = 100
delay_us = 200
kernel_soft = false
EOF

cat >"$rootfs/init" <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mark() { echo "@@VMCHECK $*"; }
section() {
    name=$1
    shift
    mark "begin $name"
    "$@" 2>&1
    mark "end $name rc=$?"
}
for m in $(cat /modules.list); do insmod "$m" || mark "insmod failed: $m"; done
i=0
while [ $i -lt 100 ] && ! { [ -e /sys/class/net/eth0 ] && [ -e /dev/nvme0n1 ]; }; do
    sleep 0.1
    i=$((i + 1))
done
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
i=0
while [ $i -lt 50 ] && [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" != 1 ]; do
    sleep 0.1
    i=$((i + 1))
done
mark "kernel $(uname -r)"
mark "driver eth0 $(basename "$(readlink /sys/class/net/eth0/device/driver)")"
cfg=/etc/irqpilot/vm.toml
readback() {
    section "ethtool-$1" ethtool -c eth0
    section "nvme-f8-$1" nvme get-feature /dev/nvme0 -f 8
    section "nvme-f9-$1" nvme get-feature /dev/nvme0 -f 9 --cdw11=1
}
section status irqpilot status --sample 1s
readback before
# Load: ICMP echo to slirp's gateway as fast as replies come, O_DIRECT 4 KiB reads.
ping -A -q 10.0.2.2 >/dev/null 2>&1 &
ping_pid=$!
( while :; do dd if=/dev/nvme0n1 of=/dev/null bs=4k iflag=direct 2>/dev/null; done ) &
dd_pid=$!
sleep 1
section plan irqpilot --config $cfg moderate --plan --sample 1s
# JSON on stdout for the host to parse; the log lines (refusals named) in their own section.
irqpilot --config $cfg --format json moderate --apply --sample 1s >/tmp/apply.json 2>/tmp/apply.err
rc=$?
mark "begin apply"
cat /tmp/apply.json
mark "end apply rc=$rc"
section apply-log cat /tmp/apply.err
readback applied
section interrupts cat /proc/interrupts
kill $ping_pid $dd_pid
wait $ping_pid $dd_pid 2>/dev/null
section revert irqpilot revert
readback reverted
# The controller's own answer to a Set Features 08h, then the value from before put back.
orig=$(nvme get-feature /dev/nvme0 -f 8 2>/dev/null | sed -n 's/.*Current value:\(0x\)\{0,1\}\([0-9a-fA-F]*\).*/0x\2/p')
section nvme-probe-set nvme set-feature /dev/nvme0 -f 8 -v 0x0101
section nvme-probe-get nvme get-feature /dev/nvme0 -f 8
section nvme-probe-set9 nvme set-feature /dev/nvme0 -f 9 -v 0x10001
[ -n "$orig" ] && nvme set-feature /dev/nvme0 -f 8 -v "$orig" >/dev/null 2>&1
mark done
poweroff -f
EOF
chmod +x "$rootfs/init"
(cd "$rootfs" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$work/initramfs.gz"

truncate -s 64M "$work/nvme.img"

# ---- boot ---------------------------------------------------------------------------------------
log=$work/serial.log
# Boots the VM with accelerator $1. With $2 (seconds), gives up early (status 3) when the guest's
# init has not spoken by then: nested KVM can hang in the guest kernel's first instructions.
boot() {
    local accel=$1 first=${2:-0} cpu=qemu64
    # `-cpu host` fails under nested KVM (MSR 0x10a is refused); the default model is enough.
    [[ $accel == tcg ]] && cpu=max
    qemu-system-x86_64 -accel "$accel" -cpu "$cpu" -m 1G -smp 2 -nographic -no-reboot \
        -kernel "/boot/vmlinuz-$kver" -initrd "$work/initramfs.gz" \
        -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4" \
        -netdev user,id=n0 -device e1000-82545em,netdev=n0 \
        -drive "file=$work/nvme.img,if=none,id=nvm,format=raw" \
        -device nvme,serial=irqpilotvm,drive=nvm \
        </dev/null >"$log" 2>&1 &
    qemu_pid=$!
    local t0=$SECONDS deadline=$((SECONDS + timeout_s)) code=0
    while kill -0 "$qemu_pid" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do
        if [[ $first -gt 0 && $((SECONDS - t0)) -ge $first ]] && ! grep -q '@@VMCHECK kernel' "$log"; then
            code=3
            break
        fi
        sleep 1
    done
    if kill -0 "$qemu_pid" 2>/dev/null; then
        kill "$qemu_pid"
        [[ $code -eq 0 ]] && code=4
    fi
    wait "$qemu_pid" 2>/dev/null || true
    qemu_pid=
    return $code
}
accel=${VM_CHECK_ACCEL:-}
kvm_note=
if [[ -z "$accel" ]]; then
    accel=tcg
    if [[ -r /dev/kvm && -w /dev/kvm ]] &&
        echo quit | timeout 20 qemu-system-x86_64 -machine none -accel kvm -display none \
            -nodefaults -monitor stdio >/dev/null 2>&1; then
        accel=kvm
    fi
fi
echo "vm-check: kernel $kver, accel $accel, timeout ${timeout_s}s, binary $bin"
rc=0
if [[ $accel == kvm && -z "${VM_CHECK_ACCEL:-}" ]]; then
    boot kvm 45 || rc=$?
    if [[ $rc -eq 3 ]]; then
        kvm_note="KVM boot hung before init (nested virtualisation?); used TCG"
        echo "vm-check: $kvm_note"
        accel=tcg
        rc=0
        boot tcg || rc=$?
    fi
else
    boot "$accel" || rc=$?
fi
if [[ $rc -ne 0 ]]; then
    tail -n 40 "$log" | tr -d '\r' >&2
    die "the VM did not power off within ${timeout_s}s (serial log above)"
fi
tr -d '\r' <"$log" >"$work/console.txt"
console=$work/console.txt
grep -q '^@@VMCHECK done' "$console" || { tail -n 60 "$console" >&2; die "the guest did not finish (console above)"; }

# ---- parse ------------------------------------------------------------------------------------
# The text of one section.
sec() { awk -v n="$1" '$0 == "@@VMCHECK begin " n {on=1; next} on && index($0, "@@VMCHECK end " n " ") == 1 {exit} on' "$console"; }
sec_rc() { sed -n "s/^@@VMCHECK end $1 rc=\([0-9]*\)\$/\1/p" "$console"; }
rx_usecs() { sec "ethtool-$1" | sed -n 's/^rx-usecs:[[:space:]]*\([0-9]*\).*/\1/p'; }
# nvme-cli prints a zero as 00000000 and anything else as 0x...; both are hex.
feature() { sec "nvme-$1" | sed -n 's/.*Current value:\(0x\)\{0,1\}\([0-9a-fA-F]*\).*/0x\2/p'; }
hex() { [[ -n "$1" ]] && printf '0x%04x' "$(($1))"; }

echo
echo "== guest console: status, plan, revert =="
for s in status plan apply-log revert; do
    echo "--- irqpilot $s (rc $(sec_rc "$s"))"
    sec "$s"
done
apply_json=$(sec apply)
echo "--- irqpilot moderate --apply (rc $(sec_rc apply)): outcomes"
jq -r '.outcomes[]? | "  \(.summary)  old=\(.old // "-")  \(.result)\(if .error then "  error=" + (.error | tostring) else "" end)"' <<<"$apply_json" || echo "$apply_json"

fails=0
rows=()
row() { rows+=("$(printf '%-34s %-14s %-14s %-14s %-14s %s' "$@")"); [[ "$6" == PASS* || "$6" == FINDING* ]] || fails=$((fails + 1)); }

# status lists both devices with queues
st=$(sec status)
nic_line=$(grep -E '^ +eth0 +[0-9a-f:.]+ +network +e1000 ' <<<"$st" || true)
nvme_line=$(grep -E '^ +nvme0 +[0-9a-f:.]+ +[a-z]+ +nvme ' <<<"$st" || true)
v=FAIL; grep -qE '(txrx|rx)[0-9]' <<<"$nic_line" && v=PASS
row "status lists eth0 (e1000) queues" "-" "-" "$(awk '{print $6}' <<<"$nic_line")" "-" "$v"
v=FAIL; grep -q 'io[0-9]' <<<"$nvme_line" && v=PASS
row "status lists nvme0 queues" "-" "-" "$(awk '{print $6}' <<<"$nvme_line")" "-" "$v"

# e1000: what irqpilot set, what ethtool reads back, what revert left
nic_before=$(rx_usecs before)
nic_applied=$(rx_usecs applied)
nic_reverted=$(rx_usecs reverted)
nic_out=$(jq -c '[.outcomes[]? | select(.action.action == "set-coalesce" and .action.device == "eth0")][0] // empty' <<<"$apply_json")
nic_set=$(jq -r '.action.params.rx_usecs // empty' <<<"$nic_out")
nic_result=$(jq -r '.result // empty' <<<"$nic_out")
v=FAIL
[[ -n "$nic_set" && "$nic_result" == written && "$nic_applied" == "$nic_set" ]] && v=PASS
[[ "$nic_result" == refused ]] && v="FAIL: refused: $(jq -c '.error' <<<"$nic_out")"
row "e1000 rx-usecs: set -> read-back" "$nic_before" "${nic_set:--}" "$nic_applied" "-" "$v"
v=FAIL; [[ -n "$nic_before" && "$nic_reverted" == "$nic_before" ]] && v=PASS
row "e1000 rx-usecs: revert" "$nic_before" "-" "-" "$nic_reverted" "$v"

# NVMe feature 08h
f8_before=$(feature f8-before)
f8_applied=$(feature f8-applied)
f8_reverted=$(feature f8-reverted)
nv_out=$(jq -c '[.outcomes[]? | select(.action.action == "set-nvme-coalescing" and .action.controller == "nvme0")][0] // empty' <<<"$apply_json")
nv_result=$(jq -r '.result // empty' <<<"$nv_out")
nv_set=$(jq -r '.action | .time_100us * 256 + .threshold - 1' <<<"$nv_out")
nv_err=$(jq -c '.error // empty' <<<"$nv_out")
if [[ -z "$nv_out" ]]; then
    row "NVMe 08h: set -> read-back" "$f8_before" "no action" "$f8_applied" "-" "FAIL (moderator did not act)"
elif [[ "$nv_result" == written ]]; then
    v=FAIL; [[ "$(hex "$f8_applied")" == "$(hex "$nv_set")" ]] && v=PASS
    row "NVMe 08h: set -> read-back" "$f8_before" "$(hex "$nv_set")" "$f8_applied" "-" "$v"
else
    v="FAIL (refused, but the value changed)"
    [[ "$(hex "$f8_applied")" == "$(hex "$f8_before")" ]] && v="FINDING: refused: $nv_err"
    row "NVMe 08h: set -> read-back" "$f8_before" "$(hex "$nv_set") $nv_result" "$f8_applied" "-" "$v"
fi
v=FAIL; [[ -n "$f8_before" && "$(hex "$f8_reverted")" == "$(hex "$f8_before")" ]] && v=PASS
row "NVMe 08h: revert" "$f8_before" "-" "-" "$f8_reverted" "$v"

# NVMe feature 09h, vector 1: irqpilot's moderator does not set it; it must be left as it was.
f9_before=$(feature f9-before)
f9_applied=$(feature f9-applied)
f9_reverted=$(feature f9-reverted)
v=FAIL; [[ -n "$f9_before" && "$f9_applied" == "$f9_before" && "$f9_reverted" == "$f9_before" ]] && v="PASS (unchanged)"
row "NVMe 09h vector 1" "$f9_before" "not set" "$f9_applied" "$f9_reverted" "$v"

v=FAIL; [[ "$(sec_rc revert)" == 0 ]] && v=PASS
row "irqpilot revert exit status" "-" "-" "-" "$(sec_rc revert)" "$v"

echo
echo "--- the controller's own answer to Set Features 08h = 0x0101 (nvme-cli, after revert)"
sec nvme-probe-set
sec nvme-probe-get
echo "--- Set Features 09h = 0x10001 (vector 1, coalescing disabled)"
sec nvme-probe-set9

echo
echo "== vm-check: guest kernel $(sed -n 's/.*@@VMCHECK kernel //p' "$console" | head -n1), accel $accel${kvm_note:+ ($kvm_note)}, $(($(date +%s) - started)) s =="
printf '%-34s %-14s %-14s %-14s %-14s %s\n' CHECK BEFORE SET READ-BACK AFTER-REVERT RESULT
printf '%s\n' "${rows[@]}"
if [[ $fails -gt 0 ]]; then
    echo "vm-check: FAIL ($fails checks)"
    exit 1
fi
echo "vm-check: PASS"
