#!/usr/bin/env bash
# Checks a built .deb's contents with dpkg-deb: the binary, both units, the example
# configuration as a conffile, one man page per subcommand, the bash/zsh/fish completions,
# the dashboard and alert rules, and a stripped binary. Usage: scripts/check-deb.sh [DEB]
# (default: the newest target/debian/irqpilot_*.deb). CI runs it after `cargo deb -p irqpilot`.
set -euo pipefail

cd "$(dirname "$0")/.."
deb="${1:-$(ls -t target/debian/irqpilot_*.deb | head -n 1)}"
echo "checking ${deb}"
contents="$(dpkg-deb -c "${deb}" | awk '{print $NF}')"
fail=0
need() {
    if ! grep -qxF "./$1" <<<"${contents}"; then
        echo "missing from the .deb: /$1"
        fail=1
    fi
}
need usr/bin/irqpilot
need usr/lib/systemd/system/irqpilot.service
need usr/lib/systemd/system/irqpilot-exporter.service
need etc/irqpilot/irqpilot.toml
need usr/share/bash-completion/completions/irqpilot
need usr/share/zsh/vendor-completions/_irqpilot
need usr/share/fish/vendor_completions.d/irqpilot.fish
need usr/share/irqpilot/grafana-dashboard.json
need usr/share/irqpilot/prometheus-alerts.yml
need usr/share/man/man1/irqpilot.1.gz
# One man page per subcommand the binary has.
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
dpkg-deb -x "${deb}" "${tmp}"
subcommands="$("${tmp}/usr/bin/irqpilot" --help | awk '/^Commands:/{on=1; next} on && /^  [a-z]/{print $1} on && /^$/{on=0}' | grep -vx help)"
[ -n "${subcommands}" ] || { echo "no subcommands listed by irqpilot --help"; fail=1; }
for sub in ${subcommands}; do
    need "usr/share/man/man1/irqpilot-${sub}.1.gz"
done
# The configuration is a conffile (dpkg keeps local edits on upgrade).
if ! dpkg-deb -I "${deb}" conffiles | grep -qx /etc/irqpilot/irqpilot.toml; then
    echo "/etc/irqpilot/irqpilot.toml is not a conffile"
    fail=1
fi
# The installed binary runs and the installed example configuration is accepted by it.
"${tmp}/usr/bin/irqpilot" --version >/dev/null
"${tmp}/usr/bin/irqpilot" --config "${tmp}/etc/irqpilot/irqpilot.toml" --root tests/fixtures/firecracker-2cpu status --sample 0 >/dev/null
# Debug information lives in the -dbgsym package, not here.
if command -v readelf >/dev/null && readelf -S "${tmp}/usr/bin/irqpilot" | grep -q '\.debug_line'; then
    echo "usr/bin/irqpilot carries debug sections"
    fail=1
fi
if [ "${fail}" -ne 0 ]; then
    exit 1
fi
echo "ok: $(wc -l <<<"${contents}") entries, $(wc -w <<<"${subcommands}") subcommands with man pages"
