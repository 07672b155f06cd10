//! `/proc/cmdline`: the kernel's tokenizer (`lib/cmdline.c: next_arg`, `kernel/params.c:
//! parse_args`) and the isolation parameters irqpilot cares about.
//!
//! Tokenizing follows the kernel, so the parameters seen here are the ones the kernel saw:
//!
//! * parameters are separated by whitespace; `"` toggles quoting, so `name="a b"` is one
//!   parameter whose value is `a b` (the quotes are dropped);
//! * a bare `--` ends kernel parameters: the rest goes to init and is kept apart (never read as
//!   a kernel parameter);
//! * names match exactly (`isolcpus=`, `nohz_full=`, `irqaffinity=` are `__setup` handlers,
//!   which do not treat `-` and `_` alike).
//!
//! The tokenizer cannot fail (the kernel accepts any text); the parameter parsers can.

use crate::error::ParseError;
use irqpilot_core::{CpuSet, IsolCpus, IsolFlag, Isolation};

/// One kernel parameter: `name` or `name=value`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The name, e.g. `isolcpus`.
    pub name: String,
    /// The value after the first `=`, quotes removed; `None` for a bare flag such as `quiet`.
    pub value: Option<String>,
}

/// A tokenized kernel command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cmdline {
    /// Kernel parameters in order (everything before a bare `--`).
    pub params: Vec<Param>,
    /// The text after a bare `--`, which the kernel hands to init; `None` when there is no `--`.
    pub init_args: Option<String>,
}

impl Cmdline {
    /// Values of every occurrence of `name`, in order.
    pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = Option<&'a str>> + 'a {
        self.params
            .iter()
            .filter(move |p| p.name == name)
            .map(|p| p.value.as_deref())
    }

    /// Whether parameter `name` appears at all (with or without a value).
    pub fn has(&self, name: &str) -> bool {
        self.params.iter().any(|p| p.name == name)
    }
}

// The kernel's isspace() for ASCII: space, \t, \n, \v, \f, \r.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits `/proc/cmdline` into parameters the way the kernel does.
pub fn parse_cmdline(text: &str) -> Cmdline {
    let b = text.as_bytes();
    let mut out = Cmdline::default();
    let mut i = 0;
    loop {
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let (param, next) = next_arg(text, i);
        if param.value.is_none() && param.name == "--" {
            out.init_args = Some(
                text[next..]
                    .trim_matches(|c: char| c.is_ascii_whitespace())
                    .to_string(),
            );
            break;
        }
        out.params.push(param);
        i = next;
    }
    out
}

/// One argument starting at `start` (not a space); returns it and the index after it.
fn next_arg(text: &str, start: usize) -> (Param, usize) {
    let b = text.as_bytes();
    let (mut begin, mut in_quote) = (start, false);
    let quoted = b[start] == b'"';
    if quoted {
        begin += 1;
        in_quote = true;
    }
    let mut equals = None;
    let mut j = begin;
    while j < b.len() {
        let c = b[j];
        if is_space(c) && !in_quote {
            break;
        }
        // As in the kernel, an `=` in the first position does not count as a separator.
        if equals.is_none() && c == b'=' && j > begin {
            equals = Some(j);
        }
        if c == b'"' {
            in_quote = !in_quote;
        }
        j += 1;
    }
    let ends_in_quote = |from: usize| j > from && b[j - 1] == b'"';
    let param = match equals {
        None => {
            let end = if quoted && ends_in_quote(begin) {
                j - 1
            } else {
                j
            };
            Param {
                name: text[begin..end].to_string(),
                value: None,
            }
        }
        Some(eq) => {
            let mut vstart = eq + 1;
            let value_quoted = vstart < j && b[vstart] == b'"';
            if value_quoted {
                vstart += 1;
            }
            let end = if (value_quoted || quoted) && ends_in_quote(vstart) {
                j - 1
            } else {
                j
            };
            Param {
                name: text[begin..eq].to_string(),
                value: Some(text[vstart..end.max(vstart)].to_string()),
            }
        }
    };
    (param, j)
}

fn render_param(p: &Param, out: &mut String) {
    let spaced = |s: &str| s.bytes().any(is_space);
    match &p.value {
        None if spaced(&p.name) => out.push_str(&format!("\"{}\"", p.name)),
        None => out.push_str(&p.name),
        Some(v) if spaced(&p.name) => out.push_str(&format!("\"{}={v}\"", p.name)),
        Some(v) if spaced(v) => out.push_str(&format!("{}=\"{v}\"", p.name)),
        Some(v) => out.push_str(&format!("{}={v}", p.name)),
    }
}

/// Renders a command line as `/proc/cmdline` prints it: parameters separated by one space, ` -- `
/// before init's arguments, then `\n`. Values holding whitespace are quoted.
pub fn render_cmdline(cmd: &Cmdline) -> String {
    let mut out = String::new();
    for (i, p) in cmd.params.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        render_param(p, &mut out);
    }
    if let Some(init) = &cmd.init_args {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("--");
        if !init.is_empty() {
            out.push(' ');
            out.push_str(init);
        }
    }
    out.push('\n');
    out
}

fn parse_list(text: &str, nr_cpus: Option<u32>) -> Result<CpuSet, irqpilot_core::CpuSetError> {
    match nr_cpus {
        Some(n) => CpuSet::parse_list_with_width(text, n),
        None => CpuSet::parse_list(text),
    }
}

fn cpulist(name: &str, value: &str, nr_cpus: Option<u32>) -> Result<CpuSet, ParseError> {
    parse_list(value, nr_cpus).map_err(|e| ParseError::new(1, format!("{name}={value}: {e}")))
}

/// Parses the value of `isolcpus=` (`[flag,...,]cpulist`), as
/// `kernel/sched/isolation.c: housekeeping_isolcpus_setup` does: leading comma-separated words
/// that start with a letter are flags (`domain`, `managed_irq`, `nohz`, or unknown ones, which the
/// kernel skips and this keeps), the rest is the cpulist. No flag means `domain`. `N` in the
/// cpulist needs `nr_cpus` (`nr_cpu_ids`).
pub fn parse_isolcpus(value: &str, nr_cpus: Option<u32>) -> Result<IsolCpus, ParseError> {
    let err = |msg: String| ParseError::new(1, format!("isolcpus={value}: {msg}"));
    let mut flags = std::collections::BTreeSet::new();
    let mut rest = value;
    while rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        let (word, tail) = match rest.split_once(',') {
            Some((w, t)) => (w, Some(t)),
            None => (rest, None),
        };
        if !word.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_') {
            return Err(err(format!("invalid flag {word:?}")));
        }
        let Some(tail) = tail else {
            return Err(err("flags but no CPU list".into()));
        };
        flags.insert(match word {
            "domain" => IsolFlag::Domain,
            "managed_irq" => IsolFlag::ManagedIrq,
            "nohz" => IsolFlag::Nohz,
            other => IsolFlag::Other(other.to_string()),
        });
        rest = tail;
    }
    if !flags
        .iter()
        .any(|f| matches!(f, IsolFlag::Domain | IsolFlag::ManagedIrq | IsolFlag::Nohz))
    {
        // Only unknown flags (or none): the kernel falls back to `domain`.
        flags.insert(IsolFlag::Domain);
    }
    if rest.is_empty() {
        return Err(err("no CPU list".into()));
    }
    let cpus = parse_list(rest, nr_cpus).map_err(|e| err(e.to_string()))?;
    Ok(IsolCpus { cpus, flags })
}

/// Renders the value of `isolcpus=`: flags in a fixed order, then the cpulist.
pub fn render_isolcpus(iso: &IsolCpus) -> String {
    let mut out = String::new();
    for f in &iso.flags {
        out.push_str(match f {
            IsolFlag::Domain => "domain",
            IsolFlag::ManagedIrq => "managed_irq",
            IsolFlag::Nohz => "nohz",
            IsolFlag::Other(s) => s,
        });
        out.push(',');
    }
    out.push_str(&iso.cpus.to_list_string());
    out
}

/// The isolation the command line asks for: `isolcpus=`, `nohz_full=` and `irqaffinity=`
/// (`isolated` is left `None`: only sysfs knows it). Parameters that do not parse are returned
/// as errors and left out; the others still count.
///
/// Repeats follow the kernel: the first `isolcpus=`/`nohz_full=` sets the mask (a later one
/// with other CPUs is refused, flags of one with the same CPUs are added) and the last
/// `irqaffinity=` wins.
pub fn isolation_from_cmdline(cmd: &Cmdline, nr_cpus: Option<u32>) -> (Isolation, Vec<ParseError>) {
    let mut iso = Isolation::default();
    let mut errors = Vec::new();
    for p in &cmd.params {
        let Some(value) = p.value.as_deref() else {
            continue;
        };
        match p.name.as_str() {
            "isolcpus" => match (parse_isolcpus(value, nr_cpus), &mut iso.isolcpus) {
                (Err(e), _) => errors.push(e),
                (Ok(new), slot @ None) => *slot = Some(new),
                (Ok(new), Some(old)) if old.cpus == new.cpus => old.flags.extend(new.flags),
                (Ok(_), Some(_)) => errors.push(ParseError::new(
                    1,
                    format!("isolcpus={value}: differs from an earlier isolcpus=, which the kernel keeps"),
                )),
            },
            "nohz_full" => match (cpulist("nohz_full", value, nr_cpus), &iso.nohz_full) {
                (Err(e), _) => errors.push(e),
                (Ok(set), None) => iso.nohz_full = Some(set),
                (Ok(set), Some(old)) if *old == set => {}
                (Ok(_), Some(_)) => errors.push(ParseError::new(
                    1,
                    format!("nohz_full={value}: differs from an earlier nohz_full=, which the kernel keeps"),
                )),
            },
            "irqaffinity" => match cpulist("irqaffinity", value, nr_cpus) {
                Ok(set) => iso.irqaffinity = Some(set),
                Err(e) => errors.push(e),
            },
            _ => {}
        }
    }
    (iso, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(name: &str, value: Option<&str>) -> Param {
        Param {
            name: name.into(),
            value: value.map(str::to_string),
        }
    }

    fn l(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    const FIRECRACKER: &str = "mitigations=auto,no_guest_host,no_guest_guest console=ttyS0 quiet \
        reboot=k panic=1 nomodule rdinit=/process_api -- --firecracker-init --addr 0.0.0.0:2024\n";

    #[test]
    fn real_cmdline_round_trips() {
        let c = parse_cmdline(FIRECRACKER);
        assert_eq!(c.params.len(), 7);
        assert_eq!(
            c.params[0],
            p("mitigations", Some("auto,no_guest_host,no_guest_guest"))
        );
        assert_eq!(c.params[2], p("quiet", None));
        assert_eq!(
            c.init_args.as_deref(),
            Some("--firecracker-init --addr 0.0.0.0:2024")
        );
        assert!(!c.has("--firecracker-init"));
        assert_eq!(render_cmdline(&c), FIRECRACKER);
    }

    #[test]
    fn params_after_double_dash_go_to_init() {
        let c = parse_cmdline("quiet -- isolcpus=1-3 nohz_full=1-3\n");
        assert!(!c.has("isolcpus"));
        let (iso, errs) = isolation_from_cmdline(&c, Some(4));
        assert!(errs.is_empty());
        assert_eq!(iso, Isolation::default());
        // `--x` or `--=1` are parameters, not the separator.
        let c = parse_cmdline("--x --=1 a\n");
        assert_eq!(c.params.len(), 3);
        assert_eq!(c.init_args, None);
        assert_eq!(parse_cmdline("a --").init_args.as_deref(), Some(""));
        assert_eq!(render_cmdline(&parse_cmdline("a --")), "a --\n");
    }

    #[test]
    fn quotes_like_the_kernel() {
        let c = parse_cmdline("dyndbg=\"file foo.c +p\" \"a b=c d\" x=\"\" y=\"unterminated z\n");
        assert_eq!(c.params[0], p("dyndbg", Some("file foo.c +p")));
        assert_eq!(c.params[1], p("a b", Some("c d")));
        assert_eq!(c.params[2], p("x", Some("")));
        // An unterminated quote runs to the end of the line, spaces and newline included.
        assert_eq!(c.params[3], p("y", Some("unterminated z\n")));
        let c = parse_cmdline("=x a=b=c\t\tflag\n");
        assert_eq!(c.params[0], p("=x", None));
        assert_eq!(c.params[1], p("a", Some("b=c")));
        assert_eq!(c.params[2], p("flag", None));
        assert_eq!(parse_cmdline("   \n"), Cmdline::default());
    }

    #[test]
    fn isolcpus_flags() {
        let i = parse_isolcpus("managed_irq,domain,2-7", Some(8)).unwrap();
        assert_eq!(i.cpus, l("2-7"));
        assert_eq!(
            i.flags,
            [IsolFlag::Domain, IsolFlag::ManagedIrq]
                .into_iter()
                .collect()
        );
        assert_eq!(render_isolcpus(&i), "domain,managed_irq,2-7");
        let bare = parse_isolcpus("1,3", None).unwrap();
        assert_eq!(bare.flags, [IsolFlag::Domain].into_iter().collect());
        let only_irq = parse_isolcpus("managed_irq,1", None).unwrap();
        assert_eq!(only_irq.flags, [IsolFlag::ManagedIrq].into_iter().collect());
        let unknown = parse_isolcpus("io_queue,nohz,4-5", None).unwrap();
        assert!(unknown.flags.contains(&IsolFlag::Other("io_queue".into())));
        assert!(unknown.flags.contains(&IsolFlag::Nohz));
        assert!(!unknown.flags.contains(&IsolFlag::Domain));
        let only_unknown = parse_isolcpus("io_queue,4-5", None).unwrap();
        assert!(only_unknown.flags.contains(&IsolFlag::Domain));
    }

    #[test]
    fn isolcpus_errors_and_last_cpu() {
        assert_eq!(parse_isolcpus("2-N", Some(8)).unwrap().cpus, l("2-7"));
        let e = parse_isolcpus("2-N", None).unwrap_err();
        assert!(e.message.contains("isolcpus=2-N"), "{e}");
        assert!(parse_isolcpus("domain", None).is_err());
        assert!(parse_isolcpus("dom-ain,1", None).is_err());
        assert!(parse_isolcpus("", None).is_err());
        assert!(parse_isolcpus("0-8", Some(8)).is_err());
        let e = parse_isolcpus("domain,zz9", None).unwrap_err();
        assert!(
            e.message.contains("zz9") || e.message.contains("invalid"),
            "{e}"
        );
    }

    #[test]
    fn isolation_fragment() {
        let c = parse_cmdline("isolcpus=managed_irq,domain,2-7 nohz_full=2-7 irqaffinity=0-1\n");
        let (iso, errs) = isolation_from_cmdline(&c, Some(8));
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(iso.isolated, None);
        assert_eq!(iso.nohz_full, Some(l("2-7")));
        assert_eq!(iso.irqaffinity, Some(l("0-1")));
        assert_eq!(iso.managed_irq_isolation(), Some(&l("2-7")));
        assert_eq!(iso.housekeeping(&l("0-7")).cpus, l("0-1"));
    }

    #[test]
    fn repeats_and_errors() {
        let c = parse_cmdline(
            "isolcpus=2-3 isolcpus=managed_irq,2-3 isolcpus=4 nohz_full=zz irqaffinity=0 irqaffinity=1 nohz_full\n",
        );
        let (iso, errs) = isolation_from_cmdline(&c, Some(4));
        let ic = iso.isolcpus.unwrap();
        assert_eq!(ic.cpus, l("2-3"));
        assert!(ic.flags.contains(&IsolFlag::ManagedIrq) && ic.flags.contains(&IsolFlag::Domain));
        assert_eq!(iso.irqaffinity, Some(l("1")));
        assert_eq!(iso.nohz_full, None);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].message.starts_with("isolcpus=4"));
        assert!(errs[1].message.contains("zz"));
        let (iso, errs) = isolation_from_cmdline(&parse_cmdline("irqaffinity=0-N"), None);
        assert_eq!(iso.irqaffinity, None);
        assert_eq!(errs.len(), 1);
    }

    fn param() -> impl Strategy<Value = Param> {
        (
            "[a-z_.]{1,12}",
            proptest::option::of("[a-zA-Z0-9_,.:/=-]{0,12}( [a-z]{1,4})?"),
        )
            .prop_map(|(name, value)| Param { name, value })
    }

    proptest! {
        #[test]
        fn cmdline_round_trip(params in proptest::collection::vec(param(), 0..8),
                              init in proptest::option::of("[a-z0-9 -]{0,20}")) {
            let init = init.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "));
            // A parameter named `--` without a value is the separator itself.
            let params: Vec<Param> = params.into_iter().filter(|p| p.name != "--").collect();
            let cmd = Cmdline { params, init_args: init };
            let text = render_cmdline(&cmd);
            prop_assert_eq!(parse_cmdline(&text), cmd.clone());
            prop_assert_eq!(render_cmdline(&parse_cmdline(&text)), text);
        }

        #[test]
        fn isolcpus_round_trip(cpus in proptest::collection::btree_set(0u32..256, 1..16),
                               flags in proptest::collection::btree_set(0usize..4, 0..4)) {
            let mut fl: std::collections::BTreeSet<IsolFlag> = flags.into_iter().map(|f| match f {
                0 => IsolFlag::Domain, 1 => IsolFlag::ManagedIrq, 2 => IsolFlag::Nohz,
                _ => IsolFlag::Other("io_queue".into()) }).collect();
            if !fl.iter().any(|f| !matches!(f, IsolFlag::Other(_))) { fl.insert(IsolFlag::Domain); }
            let iso = IsolCpus { cpus: cpus.into_iter().map(irqpilot_core::CpuId).collect(), flags: fl };
            prop_assert_eq!(parse_isolcpus(&render_isolcpus(&iso), Some(256)), Ok(iso));
        }

        #[test]
        fn never_panics(text in "\\PC*") {
            let c = parse_cmdline(&text);
            let _ = isolation_from_cmdline(&c, Some(4));
            let _ = parse_isolcpus(&text, None);
        }
    }
}
