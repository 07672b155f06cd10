//! Drawing `top` (ratatui). The layout fits 80x24: a title line, the imbalance sparkline, the
//! CPU and IRQ panels (side by side from 140 columns, stacked below that), the findings, the
//! daemon and the latest affinity change, and a line of keys. Panels scroll to keep their
//! selected row visible; a terminal smaller than 60x12 gets a message instead.

use super::cpus::{CpuRow, Fold};
use super::state::{InputKind, Panel, State};
use crate::render::human;
use irqpilot_core::findings::Severity;
use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table, TableState, Wrap,
};

/// Smallest terminal `top` draws in.
pub const MIN_SIZE: (u16, u16) = (60, 12);

const HARD: Color = Color::Red;
const SOFT: Color = Color::Yellow;

/// A bar of `width` cells for `pct` (0-100), in eighths of a cell.
pub fn bar(pct: Option<f64>, width: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let Some(p) = pct.filter(|p| p.is_finite()) else {
        return " ".repeat(width);
    };
    let eighths = ((p.clamp(0.0, 100.0) / 100.0) * (width * 8) as f64).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if eighths / 8 < width {
        s.push(PARTS[eighths % 8]);
    }
    let used = s.chars().count();
    s.extend(std::iter::repeat_n(' ', width.saturating_sub(used)));
    s
}

fn pct(p: Option<f64>) -> String {
    p.map_or_else(|| "    -".to_string(), |v| format!("{v:5.1}%"))
}

/// Draws the whole screen.
pub fn draw(f: &mut Frame<'_>, st: &mut State) {
    let area = f.area();
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let msg = format!(
            "irqpilot top needs at least {}x{} (this terminal is {}x{}); `irqpilot watch` prints the same figures as lines. q quits.",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return;
    }
    let h = area.height;
    let findings_h = if h >= 36 {
        7
    } else if h >= 24 {
        3
    } else {
        2
    };
    let status_h = if h >= 30 { 3 } else { 2 };
    let rows = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(6),
            Constraint::Length(findings_h),
            Constraint::Length(status_h),
            Constraint::Length(1),
        ])
        .split(area);
    title(f, rows[0], st);
    sparkline(f, rows[1], st);
    let (cpu_area, irq_area) = if area.width >= 140 {
        let c = Layout::default()
            .direction(Direction::Horizontal)
            .constraints([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(rows[2]);
        (c[0], c[1])
    } else {
        // Stacked: the CPU panel takes what its rows need, up to 55%; the IRQs the rest.
        let main = rows[2].height;
        let want = u16::try_from(st.cpu_rows.len() + 2).unwrap_or(u16::MAX);
        let cpu_h = want.clamp(4, (main * 55 / 100).max(4));
        let c = Layout::default()
            .direction(Direction::Vertical)
            .constraints([Constraint::Length(cpu_h), Constraint::Min(3)])
            .split(rows[2]);
        (c[0], c[1])
    };
    cpu_panel(f, cpu_area, st);
    irq_panel(f, irq_area, st);
    findings(f, rows[3], st);
    status(f, rows[4], st);
    footer(f, rows[5], st);
    if st.view.help {
        help(f, area);
    }
}

fn title(f: &mut Frame<'_>, area: Rect, st: &State) {
    let mut spans = vec![
        Span::styled(
            "irqpilot top ",
            Style::default().add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!("{} ", short(&st.source, 20)),
            Style::default().fg(Color::Green),
        ),
    ];
    if let Some((file, bytes)) = &st.recording {
        spans.push(Span::styled(
            format!("REC {} {} ", short(file, 16), human::bytes(*bytes)),
            Style::default().fg(Color::Red),
        ));
    }
    if st.view.paused {
        spans.push(Span::styled(
            "PAUSED",
            Style::default().fg(Color::Black).bg(Color::Yellow),
        ));
        spans.push(Span::raw(" "));
    }
    if let Some(r) = &st.replay {
        let pos = st
            .sample_ns
            .unwrap_or(r.first_ns)
            .saturating_sub(r.first_ns);
        let len = r.last_ns.saturating_sub(r.first_ns);
        let speed = r.speed.map_or("max".to_string(), |s| format!("{s}x"));
        spans.push(Span::styled(
            format!(
                "replay {}/{} at {speed}{} ",
                clock_len(pos),
                clock_len(len),
                if r.ended { " (end)" } else { "" }
            ),
            Style::default().fg(Color::Cyan),
        ));
    }
    let when = st
        .sample_ns
        .map_or(String::new(), |t| format!("{} UTC ", st.clock.hms(t)));
    spans.push(Span::raw(format!(
        "{when}{} | devices {}/s | timer+IPI {}/s",
        humantime::format_duration(st.view.interval),
        human::si(st.totals.device),
        human::si(st.totals.arch)
    )));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// At most `max` characters of `s`, its end kept (a path's file name matters most).
fn short(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - (max - 1)).collect();
    format!("…{tail}")
}

/// `H:MM:SS` of a span of ns.
fn clock_len(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn sparkline(f: &mut Frame<'_>, area: Rect, st: &State) {
    let label = "imbalance 1m ";
    let now = st.imbalance.map_or("-".to_string(), |v| format!("{v:.2}"));
    let max = st.history.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    let tail = format!(" now {now} max {max:.2} (max/mean, housekeeping)");
    let width = area.width as usize;
    let spark_w = width
        .saturating_sub(label.len() + tail.chars().count())
        .max(10);
    let parts = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([
            Constraint::Length(label.len() as u16),
            Constraint::Length(spark_w as u16),
            Constraint::Min(0),
        ])
        .split(area);
    f.render_widget(Paragraph::new(label), parts[0]);
    // Heights show how far above 1 (perfect balance) the index was; the latest on the right.
    let data: Vec<u64> = st
        .history
        .iter()
        .rev()
        .take(spark_w)
        .rev()
        .map(|(_, v)| ((v - 1.0).max(0.0) * 100.0) as u64 + 1)
        .collect();
    let top = data.iter().copied().max().unwrap_or(1).max(10);
    f.render_widget(
        Sparkline::default()
            .data(&data)
            .max(top)
            .style(Style::default().fg(Color::Magenta)),
        parts[1],
    );
    f.render_widget(Paragraph::new(tail), parts[2]);
}

fn panel_block(title: String, focused: bool) -> Block<'static> {
    let style = if focused {
        Style::default().add_modifier(Modifier::BOLD)
    } else {
        Style::default().fg(Color::DarkGray)
    };
    Block::default()
        .borders(Borders::TOP)
        .border_style(style)
        .title(Span::styled(title, style))
}

fn cpu_panel(f: &mut Frame<'_>, area: Rect, st: &mut State) {
    let v = &st.view;
    let focused = v.focus == Panel::Cpus;
    let n_cpus = st.machine().topology.online.len();
    let mut title = format!(
        " CPUs ({n_cpus}, fold {}{}) sort {}{} ",
        v.fold.name(),
        if v.fold == Fold::None {
            ""
        } else {
            ": Enter opens"
        },
        v.cpu_sort.name(),
        if v.cpu_reverse { " reversed" } else { "" }
    );
    if let Some(c) = &v.cpu_filter {
        title.push_str(&format!("only {c} "));
    }
    let bar_w = (area.width as usize)
        .saturating_sub(13 + 4 + 4 + 8 + 8 + 14 + 7)
        .clamp(4, 30)
        / 2;
    let header = Row::new(vec![
        Cell::from("CPU"),
        Cell::from("NODE"),
        Cell::from("KIND"),
        Cell::from("  IRQ/s"),
        Cell::from("TIMER+IPI"),
        Cell::from(Span::styled("HARDIRQ", Style::default().fg(HARD))),
        Cell::from(Span::styled("SOFTIRQ", Style::default().fg(SOFT))),
    ])
    .style(Style::default().add_modifier(Modifier::UNDERLINED));
    let rows: Vec<Row<'_>> = st
        .cpu_rows
        .iter()
        .map(|r| match r {
            CpuRow::Group {
                name,
                cpus,
                isolated,
                open,
                irq_per_sec,
                hardirq_pct,
                hardirq_max,
                softirq_pct,
            } => {
                let marker = if *open { "▾" } else { "▸" };
                let kind = if *isolated > 0 {
                    format!("{isolated} iso")
                } else {
                    String::new()
                };
                Row::new(vec![
                    Cell::from(format!("{marker} {name}")),
                    Cell::from(format!("{}c", cpus.len())),
                    Cell::from(Span::styled(kind, Style::default().fg(Color::Cyan))),
                    Cell::from(format!("{:>7}", human::si(*irq_per_sec))),
                    Cell::from(""),
                    Cell::from(Line::from(vec![
                        Span::styled(bar(*hardirq_pct, bar_w), Style::default().fg(HARD)),
                        Span::raw(pct(*hardirq_pct)),
                        // The busiest member when it stands out from the mean.
                        Span::raw(match (hardirq_max, hardirq_pct) {
                            (Some(m), Some(a)) if *m >= 1.0 && *m >= 2.0 * a => {
                                format!(" max {m:.0}%")
                            }
                            _ => String::new(),
                        }),
                    ])),
                    Cell::from(Line::from(vec![
                        Span::styled(bar(*softirq_pct, bar_w), Style::default().fg(SOFT)),
                        Span::raw(pct(*softirq_pct)),
                    ])),
                ])
                .style(Style::default().add_modifier(Modifier::BOLD))
            }
            CpuRow::Cpu(c) => {
                let meta = st.cpu_meta(c.cpu);
                let node = meta
                    .and_then(|m| m.node)
                    .map_or("-".to_string(), |n| n.0.to_string());
                let (kind, style) = match meta {
                    Some(m) if m.isolated => ("iso", Style::default().fg(Color::Cyan)),
                    Some(m) if m.housekeeping => ("hk", Style::default().fg(Color::Green)),
                    _ => ("", Style::default()),
                };
                let indent = if st.view.fold == Fold::None { "" } else { "  " };
                Row::new(vec![
                    Cell::from(format!("{indent}{}", c.cpu.0)),
                    Cell::from(node),
                    Cell::from(Span::styled(kind, style)),
                    Cell::from(format!("{:>7}", human::si(c.irq_per_sec))),
                    Cell::from(format!("{:>9}", human::si(c.arch_per_sec))),
                    Cell::from(Line::from(vec![
                        Span::styled(bar(c.hardirq_pct, bar_w), Style::default().fg(HARD)),
                        Span::raw(pct(c.hardirq_pct)),
                    ])),
                    Cell::from(Line::from(vec![
                        Span::styled(bar(c.softirq_pct, bar_w), Style::default().fg(SOFT)),
                        Span::raw(pct(c.softirq_pct)),
                    ])),
                ])
            }
        })
        .collect();
    let widths = [
        Constraint::Length(13),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length((bar_w + 14) as u16),
        Constraint::Length((bar_w + 6) as u16),
    ];
    let table = Table::new(rows, widths).header(header);
    let selected = st.view.cpu_selected;
    st.view.page[0] = panel(f, area, table, title, focused, selected);
}

/// Draws a panel's table with its title, the selected row highlighted when the panel has the
/// keyboard; returns how many rows it shows.
fn panel(
    f: &mut Frame<'_>,
    area: Rect,
    table: Table<'_>,
    title: String,
    focused: bool,
    selected: usize,
) -> usize {
    let table = table
        .block(panel_block(title, focused))
        .column_spacing(1)
        .row_highlight_style(if focused {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        });
    let mut ts = TableState::default().with_selected(Some(selected));
    f.render_stateful_widget(table, area, &mut ts);
    area.height.saturating_sub(2) as usize
}

fn irq_panel(f: &mut Frame<'_>, area: Rect, st: &mut State) {
    let v = &st.view;
    let focused = v.focus == Panel::Irqs;
    let mut title = format!(
        " busiest IRQs ({} active) sort {}{} ",
        st.irqs.len(),
        v.irq_sort.name(),
        if v.irq_reverse { " reversed" } else { "" }
    );
    if let Some(d) = &v.device_filter {
        title.push_str(&format!("device ~ {d:?} "));
    }
    if let Some(c) = &v.cpu_filter {
        title.push_str(&format!("on CPUs {c} "));
    }
    let header = Row::new(vec![
        "IRQ",
        " RATE/s",
        "DEVICE",
        "QUEUE",
        "CPUS (share)",
        "NAME",
    ])
    .style(Style::default().add_modifier(Modifier::UNDERLINED));
    let rows: Vec<Row<'_>> = st
        .irqs
        .iter()
        .map(|r| {
            Row::new(vec![
                Cell::from(r.label.clone()),
                Cell::from(format!("{:>7}", human::si(r.rate))),
                Cell::from(r.device.clone()),
                Cell::from(r.queue.clone()),
                Cell::from(r.cpus.clone()),
                Cell::from(r.name.clone()),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(12),
        Constraint::Length(7),
        Constraint::Length(20),
        Constraint::Min(8),
    ];
    let table = Table::new(rows, widths).header(header);
    let selected = st.view.irq_selected;
    st.view.page[1] = panel(f, area, table, title, focused, selected);
}

fn findings(f: &mut Frame<'_>, area: Rect, st: &State) {
    let (w, i) = st.finding_counts();
    let title = if st.findings.is_empty() {
        " findings: none ".to_string()
    } else {
        format!(
            " findings: {w} warning{}, {i} info ",
            if w == 1 { "" } else { "s" }
        )
    };
    let lines: Vec<Line<'_>> = st
        .findings
        .iter()
        .take(area.height.saturating_sub(1) as usize)
        .map(|x| {
            let (word, color) = match x.severity() {
                Severity::Warning => ("warning ", Color::Red),
                Severity::Info => ("info    ", Color::Blue),
            };
            Line::from(vec![
                Span::styled(word, Style::default().fg(color)),
                Span::raw(x.describe()),
            ])
        })
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::TOP).title(title)),
        area,
    );
}

fn status(f: &mut Frame<'_>, area: Rect, st: &State) {
    let mut lines = Vec::new();
    if let Some(e) = &st.error {
        lines.push(Line::from(Span::styled(
            format!("sampling failed: {e}"),
            Style::default().fg(Color::Red),
        )));
    }
    if let Some(m) = &st.view.message {
        lines.push(Line::from(Span::styled(
            m.clone(),
            Style::default().fg(Color::Red),
        )));
    }
    lines.push(Line::from(st.daemon.clone()));
    let room = (area.height as usize).saturating_sub(lines.len());
    if st.changes.is_empty() {
        lines.push(Line::from(Span::styled(
            "no affinity change seen",
            Style::default().fg(Color::DarkGray),
        )));
    } else {
        let n = st.changes.len();
        for c in st.changes.iter().skip(n.saturating_sub(room.max(1))) {
            lines.push(Line::from(format!("changed: {c}")));
        }
    }
    f.render_widget(Paragraph::new(lines), area);
}

fn footer(f: &mut Frame<'_>, area: Rect, st: &State) {
    let line = match &st.view.input {
        Some((kind, text)) => {
            let what = match kind {
                InputKind::Device => "filter IRQs by device",
                InputKind::Cpus => "show CPUs (list, e.g. 0-3,8)",
            };
            Line::from(vec![
                Span::styled(format!("{what}: "), Style::default().fg(Color::Cyan)),
                Span::raw(format!("{text}_")),
                Span::styled(
                    "  Enter apply, Esc cancel",
                    Style::default().fg(Color::DarkGray),
                ),
            ])
        }
        None => {
            let keys = if st.replay.is_some() {
                "q quit ? help / device c cpus s sort space pause <-/-> seek </> speed tab f +/-"
            } else {
                "q quit ? help / device c cpus s sort f fold space pause +/- interval tab x"
            };
            Line::from(Span::styled(keys, Style::default().fg(Color::DarkGray)))
        }
    };
    f.render_widget(Paragraph::new(line), area);
}

fn help(f: &mut Frame<'_>, area: Rect) {
    let text = [
        "q, Ctrl-C       quit",
        "space, p        pause / resume sampling",
        "+ / -           longer / shorter interval",
        "Tab             switch panel (CPUs, IRQs)",
        "s / r           next sort column / reverse (this panel)",
        "/               filter IRQs by device, queue or name",
        "c               show only a CPU list (and IRQs that hit it)",
        "x, Esc          clear the filters",
        "f               fold CPUs: none, by node, by package",
        "Enter           open / close the selected CPU group",
        "arrows, PgUp/Dn move the selection; Home/End: first/last",
        "replay: <-/->   seek 10 s    [ / ]  seek 1 min",
        "replay: < / >   half / double speed",
        "",
        "CPU kinds: hk housekeeping (device IRQs belong here),",
        "iso isolated (they should take none). Imbalance: max/mean",
        "device IRQ/s over housekeeping CPUs (1.00 = even).",
        "",
        "any key closes this help",
    ];
    let w = 64.min(area.width);
    let h = (text.len() as u16 + 2).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(text.iter().map(|l| Line::from(*l)).collect::<Vec<_>>())
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" irqpilot top: keys "),
            )
            .alignment(Alignment::Left),
        r,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_in_eighths() {
        assert_eq!(bar(Some(0.0), 4), "    ");
        assert_eq!(bar(Some(100.0), 4), "████");
        assert_eq!(bar(Some(50.0), 4), "██  ");
        assert_eq!(bar(Some(12.5), 2), "▎ ");
        assert_eq!(bar(None, 3), "   ");
        assert_eq!(bar(Some(250.0), 2), "██");
        assert_eq!(bar(Some(f64::NAN), 2), "  ");
    }
}
