//! A scenario file's errors name the key they are about, as `--set` spells it, at that key's
//! line and column: `scenario f.toml:LINE:COL: key = value: message` (issue 15). One case per
//! kind of error: serde's (unknown keys, wrong types, numbers out of a type's range, inside a
//! `[[workload]]` too, whose kind makes serde lose the place), ranges, and rules across fields.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot_sim::Scenario;

/// A valid scenario; line numbers below count from its first line.
const BASE: &str = "name = \"t\"
[machine]
cores_per_package = 2
[[nic]]
name = \"eth0\"
link_gbps = 10
queues = 2
[[workload]]
kind = \"rpc\"
nic = \"eth0\"
clients = 4
";

fn err(text: &str) -> String {
    match Scenario::from_toml(text, "f.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// `BASE` with `line` added at the end of the workload.
fn in_workload(line: &str) -> String {
    format!("{BASE}{line}\n")
}

#[test]
fn the_base_scenario_is_valid() {
    Scenario::from_toml(BASE, "f.toml").unwrap();
}

#[test]
fn a_workload_key_is_placed_at_its_own_line_not_the_table_header() {
    // An unknown key: think_us is not a key of bulk.
    let text = BASE
        .replace("kind = \"rpc\"", "kind = \"bulk\"")
        .replace("clients = 4\n", "load = 0.5\n\n  think_us = 5\n");
    let e = err(&text);
    assert!(
        e.starts_with("scenario f.toml:13:3: workload.0.think_us = 5: unknown key, expected "),
        "{e}"
    );
    // A whole number below its type's range.
    assert_eq!(
        err(&in_workload("start_ms = -4")),
        "scenario f.toml:12:1: workload.0.start_ms = -4: must be a whole number >= 0"
    );
    // A wrong type.
    assert_eq!(
        err(&in_workload("think_us = \"x\"")),
        "scenario f.toml:12:1: workload.0.think_us = \"x\": must be a number"
    );
    // The second workload, of another kind: its index, its line.
    let text = format!(
        "{BASE}[[workload]]\nkind = \"bulk\"\nnic = \"eth0\"\nload = 0.5\nchunk_kb = true\n"
    );
    assert_eq!(
        err(&text),
        "scenario f.toml:16:1: workload.1.chunk_kb = true: must be a number"
    );
    // Workloads written as an inline array: the key inside its inline table.
    let text = BASE.replace(
        "[[workload]]\nkind = \"rpc\"\nnic = \"eth0\"\nclients = 4\n",
        "",
    );
    let text = format!(
        "workload = [\n  {{ kind = \"rpc\", nic = \"eth0\", clients = 4 }},\n  \
         {{ kind = \"rpc\", nic = \"eth0\", clients = -1 }},\n]\n{text}"
    );
    assert_eq!(
        err(&text),
        "scenario f.toml:3:33: workload.1.clients = -1: must be a whole number in \
         1-4294967295"
    );
    // A required key left out: the table's header, naming the key.
    let e = err(&BASE.replace("clients = 4\n", ""));
    assert!(
        e.starts_with("scenario f.toml:8:1: ") && e.contains("clients"),
        "{e}"
    );
}

#[test]
fn placement_irqpilot_errors_name_their_key_and_line() {
    let e = err(&format!("{BASE}[placement.irqpilot]\nnuma_penalty = -1\n"));
    assert_eq!(
        e,
        "scenario f.toml:13:1: placement.irqpilot.numa_penalty = -1: must be a number in [0, 100]"
    );
    let e = err(&format!(
        "{BASE}[placement.irqpilot]\ntolerance = 0.1\n\n[[placement.irqpilot.pin]]\nirq = 3\n\
         cpus = \"0\"\n[[placement.irqpilot.pin]]\nirq = 4\ndevice = \"eth0\"\ncpus = \"1\"\n"
    ));
    assert_eq!(
        e,
        "scenario f.toml:18:1: placement.irqpilot.pin.1: give exactly one of irq, device, name"
    );
    let e = err(&format!(
        "{BASE}[placement.irqpilot]\nban_names = [\"ok*\", \"[\"]\n"
    ));
    assert!(
        e.starts_with("scenario f.toml:13:21: placement.irqpilot.ban_names.1 = \"[\": "),
        "{e}"
    );
    // The same for the moderator's keys, which core names as the daemon's `moderation.*`.
    let e = err(&format!("{BASE}[moderator]\n\nrelax = 2.0\n"));
    assert_eq!(
        e,
        "scenario f.toml:14:1: moderator.relax = 2: must be in (0, 1]"
    );
}

#[test]
fn rules_across_fields_are_placed_at_the_key_they_are_about() {
    assert_eq!(
        err(&format!("duration_ms = 0\n{BASE}")),
        "scenario f.toml:1:1: duration_ms = 0: must be a whole number >= 1"
    );
    assert_eq!(
        err(&format!("duration_ms = 500\n warmup_ms = 500\n{BASE}")),
        "scenario f.toml:2:2: warmup_ms = 500: must be shorter than duration_ms (500)"
    );
    assert_eq!(
        err(&BASE.replace("queues = 2", "queues = 0")),
        "scenario f.toml:7:1: nic.0.queues = 0: must be a whole number >= 1"
    );
    assert_eq!(
        err(&BASE.replace("nic = \"eth0\"", "nic = \"eth9\"")),
        "scenario f.toml:10:1: workload.0.nic = \"eth9\": no [[nic]] has this name"
    );
    let e = err(&BASE.replace(
        "cores_per_package = 2",
        "cores_per_package = 2\ncmdline = \"isolcpus=zz9\"",
    ));
    assert!(
        e.starts_with("scenario f.toml:4:1: machine.cmdline = \"isolcpus=zz9\": "),
        "{e}"
    );
    assert_eq!(
        err(&in_workload("queue = 2")),
        "scenario f.toml:12:1: workload.0.queue = 2: must be a queue of nic \"eth0\" (0-1)"
    );
    assert_eq!(
        err(&BASE.replace("queues = 2", "queues = 2\nvms = 3")),
        "scenario f.toml:8:1: nic.0.vms = 3: the NIC's 2 queues must split evenly over its VMs"
    );
}

#[test]
fn a_negative_duration_names_the_key_and_its_range() {
    assert_eq!(
        err(&BASE.replacen("name = \"t\"\n", "name = \"t\"\nduration_ms = -1\n", 1)),
        "scenario f.toml:2:1: duration_ms = -1: must be a whole number >= 1"
    );
}

#[test]
fn application_cpu_lists_steering_and_schedule_are_placed_at_their_key() {
    assert_eq!(
        err(&in_workload(
            "app_cpus = \"0-1\"\nsteering = \"rps\"\nrps_cpus = \"x\""
        )),
        "scenario f.toml:14:1: workload.0.rps_cpus = \"x\": must be a CPU list (\"0-3,8\"): \
         bad cpulist token \"x\""
    );
    assert_eq!(
        err(&in_workload("steering = \"rps\"\nrps_cpus = \"8-9\"")),
        "scenario f.toml:13:1: workload.0.rps_cpus = \"8-9\": names no CPU of the machine (0-1)"
    );
    assert_eq!(
        err(&in_workload("app_cpus = \"4\"")),
        "scenario f.toml:12:1: workload.0.app_cpus = \"4\": names no CPU of the machine (0-1)"
    );
    assert_eq!(
        err(&in_workload("rps_cpus = \"0\"")),
        "scenario f.toml:12:1: workload.0.rps_cpus = \"0\": needs steering = \"rps\" \
         (steering is \"none\")"
    );
    assert_eq!(
        err(&in_workload("app_schedule = \"scheduled\"")),
        "scenario f.toml:12:1: workload.0.app_schedule = \"scheduled\": needs app_cpus, the \
         CPUs the threads are scheduled over"
    );
    let e = err(&in_workload(
        "app_cpus = \"0\"\napp_schedule = \"sometimes\"",
    ));
    assert!(
        e.starts_with("scenario f.toml:13:1: workload.0.app_schedule = \"sometimes\": ")
            && e.contains("pinned")
            && e.contains("scheduled"),
        "{e}"
    );
    let e = err(&in_workload("steering = \"rss\""));
    assert!(
        e.starts_with("scenario f.toml:12:1: workload.0.steering = \"rss\": ") && e.contains("rps"),
        "{e}"
    );
}
