//! `top` drawn into a buffer (no terminal): the generated 256-CPU server with moving counters,
//! at 80x24 (golden screen) and 200x60, and the keys a person uses: open a node, filter by
//! device and by CPU list, sort, change the interval, scroll to the last CPU.
//!
//! `UPDATE_GOLDEN=1 cargo test -p irqpilot --test top_view` rewrites the golden screen; review
//! its diff like an API change.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use irqpilot::live::Sampler;
use irqpilot::top::state::{State, WallClock};
use irqpilot::top::view;
use irqpilot_core::Platform;
use irqpilot_core::findings::FindingsConfig;
use irqpilot_linux::generate::MovingServer;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::Path;
use std::time::Duration;

fn state_after(seconds: u64) -> (MovingServer, Sampler, State) {
    let mut server = MovingServer::new(1);
    let machine = server.machine().unwrap();
    let mut sampler = Sampler::new(&machine);
    let clock = WallClock {
        unix_ns: 1_767_225_600_000_000_000, // 2026-01-01 00:00:00 UTC
        mono_ns: server.now().0,
    };
    let mut st = State::new(
        "/srv/big".into(),
        machine,
        FindingsConfig::default(),
        Duration::from_secs(1),
        clock,
    );
    sampler.sample(&mut server).unwrap();
    for _ in 0..seconds {
        server.sleep(1_000_000_000);
        assert!(sampler.sample(&mut server).unwrap());
        st.update(&sampler);
    }
    st.daemon = "no daemon running; no journal: irqpilot has changed nothing here".into();
    (server, sampler, st)
}

fn screen(st: &mut State, w: u16, h: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, st)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn key(st: &mut State, code: KeyCode) {
    st.key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn type_text(st: &mut State, text: &str) {
    for c in text.chars() {
        key(st, KeyCode::Char(c));
    }
    key(st, KeyCode::Enter);
}

#[test]
fn the_80x24_screen_is_golden() {
    let (_, _, mut st) = state_after(5);
    let lines = screen(&mut st, 80, 24);
    let text = lines.join("\n") + "\n";
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/top-80x24.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(
        text, want,
        "the screen changed; UPDATE_GOLDEN=1 after reviewing it"
    );
    // What a person reads on it.
    assert!(lines[0].starts_with("irqpilot top /srv/big 00:00:05 UTC 1s | devices "));
    assert!(lines[1].starts_with("imbalance 1m "));
    assert!(lines.iter().any(|l| l.starts_with("▸ node0       128c")));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("▸ node1       128c 16 iso"))
    );
    assert!(lines.iter().any(|l| l.contains("busiest IRQs")));
    assert!(lines.iter().any(|l| l.contains("findings:")));
    assert!(lines.iter().all(|l| l.chars().count() <= 80));
}

#[test]
fn keys_open_filter_sort_and_scroll() {
    let (_, _, mut st) = state_after(3);
    // The busiest IRQ is listed first, with its device and queue.
    let busiest = st.irqs[0].clone();
    assert!(st.irqs.windows(2).all(|w| w[0].rate >= w[1].rate));
    let lines = screen(&mut st, 80, 24);
    let row = lines
        .iter()
        .find(|l| l.starts_with(&format!("{:<5} ", busiest.label)))
        .unwrap();
    assert!(row.contains(&busiest.device), "{row}");

    // Enter opens node0: its CPUs appear under it, marked hk; node1 lists its isolated CPUs.
    key(&mut st, KeyCode::Enter);
    let lines = screen(&mut st, 80, 24);
    assert!(lines.iter().any(|l| l.starts_with("▾ node0")));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  ") && l.contains(" 0    hk "))
    );

    // Filter IRQs by device: every IRQ row left is that device's.
    let dev = st
        .irqs
        .iter()
        .find(|r| r.device.starts_with("nvme"))
        .unwrap()
        .device
        .clone();
    key(&mut st, KeyCode::Char('/'));
    type_text(&mut st, &dev);
    assert!(!st.irqs.is_empty());
    assert!(st.irqs.iter().all(|r| r.device == dev));
    let lines = screen(&mut st, 80, 24);
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("device ~ \"{dev}\"")))
    );

    // A CPU list: only those CPUs, and only IRQs that landed on them.
    key(&mut st, KeyCode::Char('x'));
    key(&mut st, KeyCode::Char('f')); // package
    key(&mut st, KeyCode::Char('f')); // none
    key(&mut st, KeyCode::Char('c'));
    type_text(&mut st, "120-127");
    let lines = screen(&mut st, 120, 40);
    let cpu_rows: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(" iso ") || l.contains(" hk "))
        .collect();
    assert_eq!(cpu_rows.len(), 8, "{lines:#?}");
    assert!(cpu_rows.iter().all(|l| l.contains(" iso ")));
    assert!(
        st.irqs
            .iter()
            .all(|r| r.on.iter().any(|c| (120..=127).contains(&c.0)))
    );

    // A bad CPU list says so and keeps the old filter.
    key(&mut st, KeyCode::Char('c'));
    key(&mut st, KeyCode::Backspace);
    type_text(&mut st, "x-");
    assert!(st.view.message.as_deref().unwrap().contains("bad CPU list"));
    assert_eq!(st.cpu_rows.len(), 8);

    // Sort the CPUs by number, reversed: 127 first.
    key(&mut st, KeyCode::Char('s'));
    key(&mut st, KeyCode::Char('s'));
    key(&mut st, KeyCode::Char('s'));
    key(&mut st, KeyCode::Char('r'));
    let lines = screen(&mut st, 120, 40);
    assert!(lines.iter().any(|l| l.contains("sort CPU reversed")));
    let first = lines.iter().position(|l| l.starts_with("127 ")).unwrap();
    let last = lines.iter().position(|l| l.starts_with("120 ")).unwrap();
    assert!(first < last);

    // Interval up and down.
    key(&mut st, KeyCode::Char('+'));
    assert_eq!(st.view.interval, Duration::from_secs(2));
    key(&mut st, KeyCode::Char('-'));
    key(&mut st, KeyCode::Char('-'));
    assert_eq!(st.view.interval, Duration::from_millis(500));
    key(&mut st, KeyCode::Char(' '));
    assert!(st.view.paused);
    assert!(screen(&mut st, 80, 24)[0].contains("PAUSED"));
}

#[test]
fn every_one_of_256_cpus_is_reachable() {
    let (_, _, mut st) = state_after(2);
    key(&mut st, KeyCode::Char('f')); // package
    key(&mut st, KeyCode::Char('f')); // none: 256 rows
    key(&mut st, KeyCode::Char('s')); // by hardirq
    key(&mut st, KeyCode::Char('s')); // softirq
    key(&mut st, KeyCode::Char('s')); // CPU number
    assert_eq!(st.cpu_rows.len(), 256);
    key(&mut st, KeyCode::End);
    let lines = screen(&mut st, 80, 24);
    assert!(lines.iter().any(|l| l.starts_with("255 ")), "{lines:#?}");
    key(&mut st, KeyCode::Home);
    let lines = screen(&mut st, 80, 24);
    assert!(lines.iter().any(|l| l.starts_with("0 ")));
    key(&mut st, KeyCode::PageDown);
    assert!(st.view.cpu_selected > 1);
    // A big screen shows both panels side by side.
    let lines = screen(&mut st, 200, 60);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("CPUs (256") && l.contains("busiest IRQs"))
    );
    // Too small: a message instead of a broken screen.
    let lines = screen(&mut st, 50, 10);
    assert!(lines.join(" ").contains("irqpilot watch"));
}
