#!/bin/sh
# The guest half of scripts/vm-check.sh: the checks run inside the VM, as a systemd service
# (vmcheck.service) of the initramfs that script builds. It only collects evidence: every
# command's output, exit status and timing, and snapshots of the kernel's state, under /results.
# At the end it sends /results to the host over the second serial port (ttyS1) and powers off;
# the host decides PASS or FAIL. Nothing here runs on the host.
#
# Snapshots (`snap NAME` -> /results/snap/NAME/): every /proc/irq/N/{smp_affinity,
# smp_affinity_list, effective_affinity, effective_affinity_list} as the kernel prints it,
# default_smp_affinity and /proc/interrupts; with "coalescing" also `ethtool -c` of both NICs
# and NVMe feature 08h; with "knobs" also `ethtool -l` and feature 09h of every vector. Windows (`window NAME S`): /proc/interrupts S seconds
# apart, for per-CPU interrupt counts.
set -u
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
R=/results
mkdir -p $R/snap
# NCPU, ISO, HK, DAEMON_LOW_S, DAEMON_LOAD_S, REF_LOW_S, REF_LOAD_S, IRQBALANCE_S, DEADLINE_S,
# UNIT (the unit's path)
. /etc/vmcheck/env

up() { cut -d' ' -f1 /proc/uptime; }
mark() {
    echo "@@VM $(up) $*" >/dev/console
    echo "$(up) $*" >>$R/progress
}
# run NAME CMD...: stdout, stderr, exit status and start/end uptime into $R/NAME.{out,err,rc,time}.
run() {
    n=$1
    shift
    a=$(up)
    "$@" >$R/$n.out 2>$R/$n.err
    echo $? >$R/$n.rc
    echo "$a $(up)" >$R/$n.time
}

snap() {
    s=$R/snap/$1
    mkdir -p $s
    # Shell builtins only (read, echo): a fork costs tens of ms on a loaded TCG guest.
    for d in /proc/irq/[0-9]*; do
        n=${d##*/}
        for f in smp_affinity smp_affinity_list effective_affinity effective_affinity_list; do
            [ -e $d/$f ] || continue
            v=
            IFS= read -r v <$d/$f 2>/dev/null
            echo "$n $f $v"
        done
    done >$s/affinity
    IFS= read -r v </proc/irq/default_smp_affinity
    echo "$v" >$s/default_smp_affinity
    while IFS= read -r v; do echo "$v"; done </proc/interrupts >$s/interrupts
    [ -n "${2:-}" ] || return 0
    for i in $E $V; do
        ethtool -c $i >$s/ethtool-c.$i 2>&1
    done
    nvme get-feature /dev/nvme0 -f 8 >$s/nvme-f8 2>&1
    [ "$2" = knobs ] || return 0
    for i in $E $V; do
        ethtool -l $i >$s/ethtool-l.$i 2>&1
    done
    v=0
    while [ $v -le $NVEC ]; do
        nvme get-feature /dev/nvme0 -f 9 --cdw11=$v >$s/nvme-f9.$v 2>&1
        v=$((v + 1))
    done
}

window() {
    while IFS= read -r v; do echo "$v"; done </proc/interrupts >$R/window.$1.a
    sleep $2
    while IFS= read -r v; do echo "$v"; done </proc/interrupts >$R/window.$1.b
}

# The lab's own bad start: every movable IRQ of the three devices on CPU 0, as a boot-time
# script or an old balancer leaves a machine, so that placement has something to do. The
# kernel refuses the managed NVMe queues (EIO); that is recorded, not hidden.
pileup() {
    : >$R/pileup.$1
    for n in $DEVIRQS; do
        if echo 0 2>/dev/null >/proc/irq/$n/smp_affinity_list; then
            echo "$n ok" >>$R/pileup.$1
        else
            echo "$n refused" >>$R/pileup.$1
        fi
    done
}

# The operator's layout for check 3: the boot layout, except that the last two virtio-net queue
# pairs trade CPUs. It puts queues a channel cut removes on the CPUs to isolate, and differs
# from what the driver sets when its channel count changes, so a revert that lets the driver
# have the last word is caught.
operator_layout() {
    : >$R/layout.$1
    while read -r n name; do
        want=$(awk -v n="$n" '$1 == n && $2 == "smp_affinity_list" {print $3}' $R/snap/boot/affinity)
        case $name in
        virtio*-input.* | virtio*-output.*)
            q=${name##*.}
            [ "$q" -eq $((NCPU - 2)) ] && want=$((NCPU - 1))
            [ "$q" -eq $((NCPU - 1)) ] && want=$((NCPU - 2))
            ;;
        esac
        if echo "$want" 2>/dev/null >/proc/irq/$n/smp_affinity_list; then
            echo "$n $want ok" >>$R/layout.$1
        else
            echo "$n $want refused" >>$R/layout.$1
        fi
    done <$R/devirqs
}

# x86 has about 200 vectors per CPU, so a 4-queue NIC always fits on the housekeeping CPUs and
# `isolate` never needs to cut its channels. To check a real cut, the lab declares the largest
# per-CPU vector capacity at which the planner cuts the virtio-net channels and the cut then
# suffices, found by asking `isolate` itself (plan only) on the machine as it is now.
isolate_config() {
    irqpilot --format json isolate --cpus $ISO >/tmp/isolate-plan.json 2>&1
    needed=$(sed -n 's/.*"needed": \([0-9]*\).*/\1/p' /tmp/isolate-plan.json)
    cap=$(((${needed:-64} + 1) / 2 + 1))
    while [ $cap -gt 1 ]; do
        printf '[placement]\nvector_capacity = %s\n' $cap >/run/vmcheck/isolate.toml
        irqpilot --config /run/vmcheck/isolate.toml --format json isolate --cpus $ISO >/tmp/isolate-plan.json 2>&1
        grep -q '"recommended"' /tmp/isolate-plan.json && grep -q '"fits_after_channels": true' /tmp/isolate-plan.json && break
        cap=$((cap - 1))
    done
    echo $cap >$R/isolate-capacity.$1
    mark "isolate: vector_capacity = $cap per CPU makes the planner cut $V"
}

# Sleeps until $1 seconds after the daemon started ($t_start).
until_t() { sleep $(awk -v a="$t_start" -v b="$(up)" -v d="$1" 'BEGIN { r = a + d - b; print (r > 0 ? r : 0) }'); }

# A daemon's run from its start: LOW_S seconds without load, then LOAD_S seconds loaded, with
# coalescing snapshots PREFIX-low-a/-low-b (the low-load period's second half: the first lets a
# moderator that takes over its knobs at low load settle) and PREFIX-load-mid/-load-end.
daemon_periods() { # PREFIX LOW_S LOAD_S
    until_t $(($2 / 2))
    snap $1-low-a coalescing
    until_t $2
    snap $1-low-b coalescing
    load_start
    until_t $(($2 + $3 / 2))
    snap $1-load-mid coalescing
    until_t $(($2 + $3))
    snap $1-load-end coalescing
}

# Load on every device from every CPU, at rates a TCG guest on two host cores keeps up with:
# ICMP echo every 2 ms over the e1000 (to user-mode networking's gateway) and every 5 ms per CPU
# over virtio-net (to the host end of its tap device, one source address per CPU so that each
# CPU's flow uses its own queue pair), and O_DIRECT 4 KiB reads of the NVMe namespace from each
# CPU (each CPU submits on its own queue), 50 at a time. At nice 19: the interrupts come all the
# same, and the commands under test are not starved of the TCG guest's little CPU.
LOADPINGS=
LOADREADS=
load_start() {
    rm -f /tmp/stop-load
    ping -i 0.002 -q -I $E 10.0.2.2 >/dev/null 2>&1 &
    LOADPINGS="$!"
    c=0
    while [ $c -lt $NCPU ]; do
        m=$(printf '%x' $((1 << c)))
        taskset $m ping -i 0.005 -q -I 10.0.9.$((10 + c)) 10.0.9.1 >/dev/null 2>&1 &
        LOADPINGS="$LOADPINGS $!"
        taskset $m sh -c 'while [ ! -e /tmp/stop-load ]; do
            dd if=/dev/nvme0n1 of=/dev/null bs=4k count=50 iflag=direct 2>/dev/null; sleep 0.1; done' &
        LOADREADS="$LOADREADS $!"
        c=$((c + 1))
    done
    # busybox has no nice applet; the readers' children inherit the loop's priority.
    renice 19 -p $LOADPINGS $LOADREADS >/dev/null 2>&1
    mark "load on"
}
load_stop() {
    touch /tmp/stop-load
    kill $LOADPINGS 2>/dev/null
    wait $LOADPINGS $LOADREADS 2>/dev/null
    LOADPINGS=
    LOADREADS=
    mark "load off"
}

finish() {
    [ -n "${WATCHDOG:-}" ] && kill $WATCHDOG 2>/dev/null
    mark "done"
    echo "$(up)" >$R/finished
    stty -F /dev/ttyS1 115200 raw -echo 2>/dev/null
    { echo "@@RESULTS-BEGIN"; tar -C / -c results | gzip -1 | base64; echo "@@RESULTS-END"; } >/dev/ttyS1
    sync
    poweroff -f
}

# ---- set up -----------------------------------------------------------------------------------
mark "guest up"
# Whatever hangs, the host gets what was collected before the deadline.
(
    sleep $DEADLINE_S
    echo "the checks did not finish within $DEADLINE_S s" >$R/fatal
    finish
) &
WATCHDOG=$!
[ -d /sys/kernel/debug/irq ] || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
for m in $(cat /etc/vmcheck/modules); do
    insmod $m 2>>$R/insmod.err || echo "insmod failed: $m" >>$R/insmod.err
done
E=
V=
i=0
while [ $i -lt 200 ]; do
    for n in /sys/class/net/*; do
        case $(basename "$(readlink $n/device/driver 2>/dev/null)") in
        e1000) E=${n##*/} ;;
        virtio_net) V=${n##*/} ;;
        esac
    done
    [ -n "$E" ] && [ -n "$V" ] && [ -e /dev/nvme0n1 ] && break
    sleep 0.1
    i=$((i + 1))
done
if [ -z "$E" ] || [ -z "$V" ] || [ ! -e /dev/nvme0n1 ]; then
    echo "devices missing: e1000=$E virtio_net=$V nvme0n1=$(ls /dev/nvme0n1 2>&1)" >$R/fatal
    finish
fi
ip link set lo up
ip addr add 10.0.2.15/24 dev $E
ip link set $E up
ip addr add 10.0.9.2/24 dev $V
c=0
while [ $c -lt $NCPU ]; do
    ip addr add 10.0.9.$((10 + c))/24 dev $V
    c=$((c + 1))
done
ip link set $V up
i=0
while [ $i -lt 100 ]; do
    [ "$(cat /sys/class/net/$E/carrier 2>/dev/null)$(cat /sys/class/net/$V/carrier 2>/dev/null)" = 11 ] && break
    sleep 0.1
    i=$((i + 1))
done
ping -c 2 -W 3 -I $E 10.0.2.2 >$R/ping-e1000.out 2>&1
echo $? >$R/ping-e1000.rc
ping -c 2 -W 3 -I 10.0.9.2 10.0.9.1 >$R/ping-virtio.out 2>&1
echo $? >$R/ping-virtio.rc

# The IRQs of the three devices, by the names their drivers give them.
DEVIRQS=$(awk -v e="$E" '$1 ~ /^[0-9]+:$/ { n = $NF; if (n == e || n ~ /^virtio[0-9]+-/ || n ~ /^nvme[0-9]+q[0-9]+$/) { sub(":", "", $1); print $1 } }' /proc/interrupts)
awk -v e="$E" '$1 ~ /^[0-9]+:$/ { n = $NF; if (n == e || n ~ /^virtio[0-9]+-/ || n ~ /^nvme[0-9]+q[0-9]+$/) { sub(":", "", $1); print $1, n } }' /proc/interrupts >$R/devirqs
NVEC=$(grep -c 'nvme0q[0-9]*$' /proc/interrupts)
NVEC=$((NVEC - 1))
{
    echo "E=$E"
    echo "V=$V"
    echo "NCPU=$NCPU"
    echo "ISO=$ISO"
    echo "HK=$HK"
    echo "NVEC=$NVEC"
    echo "IRQBALANCE_S=$IRQBALANCE_S"
    echo "REF_S=$((REF_LOW_S + REF_LOAD_S))"
    echo "DEVIRQS='$(echo $DEVIRQS)'"
    echo "KERNEL='$(uname -r)'"
} >$R/env
{
    irqpilot --version
    ethtool --version
    nvme version
    irqbalance --version 2>&1 | head -n 1
    lsirq -V
    /usr/bin/setpriv -V
    systemctl --version | head -n 1
    busybox 2>&1 | head -n 1
} >$R/versions 2>&1
ethtool -i $E >$R/ethtool-i.$E 2>&1
ethtool -i $V >$R/ethtool-i.$V 2>&1
mark "devices: e1000 $E, virtio-net $V, nvme0 with $NVEC I/O queues; IRQs $(echo $DEVIRQS)"
snap boot knobs
cp "$UNIT" $R/irqpilot.service

# ---- 1. status agrees with the kernel -----------------------------------------------------------
mark "check 1: status"
load_start
sleep 2
run status irqpilot --format json status --sample 1s
snap status
lsirq -J >$R/lsirq.json 2>&1
window status 2

# ---- 2. plan / apply / revert on the real /proc/irq ---------------------------------------------
mark "check 2: plan, apply, revert"
pileup c2
sleep 1
snap c2-before
window pileup 3
run plan irqpilot --format json plan --sample 1s
snap c2-plan
run apply irqpilot --format json apply --sample 1s
window irqpilot 3
snap c2-apply
run revert irqpilot --format json revert
snap c2-revert

# ---- 3. isolate: a real channel cut, managed IRQs refused, then the cut refused ------------------
mark "check 3: isolate $ISO"
mkdir -p /run/vmcheck
load_stop
operator_layout c3
isolate_config c3
load_start
sleep 2
snap c3-before knobs
run iso-cut irqpilot --config /run/vmcheck/isolate.toml --format json isolate --cpus $ISO --apply
window iso-cut 2
snap c3-cut knobs
run iso-cut-revert irqpilot --format json revert
snap c3-cut-revert knobs
# The same without CAP_NET_ADMIN (uid 0 keeps the /proc/irq files it owns): the kernel refuses
# the channel cut with EPERM. util-linux's setpriv by its path: busybox runs its own applet
# for a bare name.
load_stop
operator_layout c3-nocap
isolate_config c3-nocap
/usr/bin/setpriv --bounding-set -net_admin cat /proc/self/status >$R/iso-nocap.status 2>&1
load_start
sleep 2
snap c3-nocap-before knobs
run iso-nocap /usr/bin/setpriv --bounding-set -net_admin \
    irqpilot --config /run/vmcheck/isolate.toml --format json isolate --cpus $ISO --apply
window iso-nocap 2
snap c3-nocap knobs
run iso-nocap-revert irqpilot --format json revert
snap c3-nocap-revert knobs
load_stop

# ---- 4. the daemon under its shipped unit --------------------------------------------------------
mark "check 4: daemon under $UNIT"
pileup c4
cp /etc/vmcheck/daemon.toml /etc/irqpilot/irqpilot.toml
sleep 1
snap c4-before knobs
t_start=$(up)
run d-start systemctl start irqpilot.service
sleep 1
systemctl show irqpilot.service -p MainPID -p ActiveState -p SubState >$R/d-show-start 2>&1
pid=$(systemctl show irqpilot.service -p MainPID --value)
cat /proc/$pid/status >$R/d-proc-status 2>&1
tr '\0' ' ' </proc/$pid/cmdline >$R/d-cmdline 2>&1
daemon_periods c4 $DAEMON_LOW_S $DAEMON_LOAD_S
systemctl show irqpilot.service -p MainPID -p ActiveState -p SubState -p NRestarts >$R/d-show-before-stop 2>&1
t_stop=$(up)
echo "$t_start $t_stop" >$R/d-ran
run d-stop systemctl stop irqpilot.service
systemctl show irqpilot.service -p ExecMainStatus -p ExecMainCode -p Result -p ActiveState >$R/d-show-stop 2>&1
snap c4-after knobs
load_stop
journalctl -u irqpilot.service --no-pager -o short-monotonic >$R/d-journal 2>&1
journalctl -u irqpilot.service --no-pager -o json >$R/d-journal.json 2>&1
rm -f /etc/irqpilot/irqpilot.toml

# ---- 4r. the same daemon as plain root, without the unit's sandbox --------------------------------
# What the daemon itself does on real drivers, apart from what the unit allows it.
mark "check 4r: daemon as root, no unit"
pileup c4r
sleep 1
snap c4r-before knobs
t_start=$(up)
irqpilot --config /etc/vmcheck/daemon.toml daemon >$R/r-daemon.out 2>$R/r-daemon.err &
rpid=$!
daemon_periods c4r $REF_LOW_S $REF_LOAD_S
echo "$t_start $(up)" >$R/r-ran
# Its placement's per-CPU load, for the side by side with irqbalance (check 5).
window daemon 3
kill -TERM $rpid
wait $rpid
echo $? >$R/r-daemon.rc
snap c4r-after knobs
load_stop

# ---- 5. Debian's irqbalance on the same devices --------------------------------------------------
mark "check 5: irqbalance"
pileup c5
snap c5-before
load_start
sleep 1
run ib-start systemctl start irqbalance.service
sleep $IRQBALANCE_S
systemctl show irqbalance.service -p MainPID -p ActiveState -p SubState >$R/ib-show 2>&1
snap c5-irqbalance
window irqbalance 3
run ib-stop systemctl stop irqbalance.service
load_stop
journalctl -u irqbalance.service --no-pager -o short-monotonic >$R/ib-journal 2>&1

finish
