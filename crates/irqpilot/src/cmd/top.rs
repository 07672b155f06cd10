//! `irqpilot top`: a full-screen live view of a machine's interrupts (per-CPU rates and
//! hardirq/softirq time, the busiest IRQs with their device, queue and CPUs, the imbalance over
//! the last minute, findings, what the daemon changed), of any `--root`, or of a recording
//! (`--replay`, with seeking and speed keys). Keys: `crate::top::keys`. It needs a terminal;
//! without one it says to use `watch`.

use crate::Settings;
use crate::cli::TopArgs;
use crate::cmd::placement_common::journal_path;
use crate::live::Sampler;
use crate::live::daemon::DaemonView;
use crate::live::recording::{Follower, meta_now, open_replay, replayed_changes};
use crate::top::keys::Action;
use crate::top::state::{ReplayInfo, State, WallClock};
use crate::top::view;
use anyhow::{Context, Result, bail};
use irqpilot_core::Platform;
use irqpilot_linux::LinuxPlatform;
use irqpilot_record::{ReplayPlatform, Speed};
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::{Terminal, backend::CrosstermBackend};
use std::io::{IsTerminal, Stdout};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How often the daemon's state is looked at again.
const DAEMON_EVERY: Duration = Duration::from_secs(2);

/// Why `top` cannot run here, pointing to `watch`.
fn check_terminal() -> Result<()> {
    let hint = "use `irqpilot watch` for the same figures as lines (or `--format json`)";
    if !std::io::stdout().is_terminal() {
        bail!("top needs a terminal, and standard output is not one; {hint}");
    }
    if !std::io::stdin().is_terminal() {
        bail!("top reads keys from a terminal, and standard input is not one; {hint}");
    }
    match std::env::var("TERM").as_deref() {
        Ok("dumb") | Ok("") => {
            bail!("this terminal (TERM=dumb) cannot draw a full-screen view; {hint}")
        }
        _ => Ok(()),
    }
}

/// Raw mode and the alternate screen for as long as it lives; restored on drop (also when
/// unwinding from a panic).
struct Screen {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    fn enter() -> Result<Screen> {
        let hint = "use `irqpilot watch` instead";
        enable_raw_mode()
            .with_context(|| format!("this terminal cannot be put in raw mode; {hint}"))?;
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, cursor::Hide) {
            let _ = disable_raw_mode();
            return Err(e)
                .with_context(|| format!("this terminal has no alternate screen; {hint}"));
        }
        let terminal = Terminal::new(CrosstermBackend::new(out))?;
        Ok(Screen { terminal })
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = disable_raw_mode();
        let _ = execute!(
            self.terminal.backend_mut(),
            LeaveAlternateScreen,
            cursor::Show
        );
    }
}

// One value for the life of the program: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Source {
    Live {
        platform: LinuxPlatform,
        follower: Follower,
        daemon: DaemonView,
        daemon_at: Option<Instant>,
    },
    Replay {
        platform: ReplayPlatform,
    },
}

/// Runs `irqpilot top`.
pub fn run(args: &TopArgs, settings: &Settings) -> Result<ExitCode> {
    check_terminal()?;
    let r = &args.recording;
    let (mut source, machine, mut state) = match &r.replay {
        None => {
            let interval = args.interval.unwrap_or(Duration::from_secs(1));
            let mut platform = LinuxPlatform::with_root(&settings.root);
            let machine = platform.machine()?;
            let mono = platform.now().0;
            let unix = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(0));
            let record = r
                .record
                .as_deref()
                .map(|p| (p, meta_now("top", &settings.root, interval, mono)));
            let follower = Follower::new(&settings.root, &machine, record)?;
            let journal = journal_path(
                settings,
                args.journal
                    .journal
                    .as_deref()
                    .or(settings.config.daemon.journal.as_deref()),
            );
            let source = if irqpilot_linux::Root::new(&settings.root).is_live() {
                "/ (live)".to_string()
            } else {
                settings.root.display().to_string()
            };
            let state = State::new(
                source,
                machine.clone(),
                settings.config.findings.clone(),
                interval,
                WallClock {
                    unix_ns: unix,
                    mono_ns: mono,
                },
            );
            let source = Source::Live {
                platform,
                follower,
                daemon: DaemonView::new(&settings.root, journal),
                daemon_at: None,
            };
            (source, machine, state)
        }
        Some(path) => {
            let (rec, mut platform) = open_replay(path, Speed::Max, r.seek)?;
            let meta = rec.meta().clone();
            let interval = args
                .interval
                .unwrap_or(Duration::from_nanos(meta.interval_ns.max(1)));
            let machine = platform.machine()?;
            let (first, last) = rec.span_ns().unwrap_or((0, 0));
            let mut state = State::new(
                path.display().to_string(),
                machine.clone(),
                settings.config.findings.clone(),
                interval,
                WallClock {
                    unix_ns: meta.created_unix_ns,
                    mono_ns: meta.start_mono_ns,
                },
            );
            let speed = r.speed.is_finite().then_some(r.speed);
            state.replay = Some(ReplayInfo {
                first_ns: first,
                last_ns: last,
                speed,
                ended: false,
            });
            state.daemon = format!(
                "replaying a recording of {} made by irqpilot {} ({}{})",
                meta.root,
                meta.irqpilot,
                meta.source,
                meta.hostname
                    .as_ref()
                    .map_or(String::new(), |h| format!(" on {h}"))
            );
            (Source::Replay { platform }, machine, state)
        }
    };
    let mut sampler = Sampler::new(&machine);
    // The baseline: rates come with the first interval.
    sample(&mut source, &mut sampler, &mut state, false);
    let mut screen = Screen::enter()?;
    let result = event_loop(&mut screen, &mut source, &mut sampler, &mut state);
    drop(screen);
    if let Source::Live { follower, .. } = source {
        if let Some((path, stats)) = follower.finish()? {
            eprintln!(
                "recorded {} samples to {} ({})",
                stats.samples,
                path.display(),
                crate::render::human::bytes(stats.bytes)
            );
        }
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

/// Wall time between two samples.
fn wall_interval(source: &Source, state: &State) -> Duration {
    match (source, state.replay.and_then(|r| r.speed)) {
        (Source::Replay { .. }, Some(x)) => state.view.interval.div_f64(x.max(1e-3)),
        (Source::Replay { .. }, None) => Duration::from_millis(50),
        _ => state.view.interval,
    }
}

fn event_loop(
    screen: &mut Screen,
    source: &mut Source,
    sampler: &mut Sampler,
    state: &mut State,
) -> Result<()> {
    let mut dirty = true;
    let mut next = Instant::now() + wall_interval(source, state);
    loop {
        if let Source::Live {
            daemon, daemon_at, ..
        } = source
        {
            if daemon_at.is_none_or(|t| t.elapsed() >= DAEMON_EVERY) {
                daemon.refresh();
                *daemon_at = Some(Instant::now());
                state.daemon = daemon.line();
                dirty = true;
            }
        }
        if dirty {
            screen.terminal.draw(|f| view::draw(f, state))?;
            dirty = false;
        }
        let wait = if state.view.paused {
            Duration::from_millis(500)
        } else {
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(500))
        };
        if event::poll(wait)? {
            match event::read()? {
                Event::Key(k) => match state.key(k) {
                    Action::Quit => return Ok(()),
                    Action::None => {}
                    Action::Redraw => dirty = true,
                    Action::Reschedule => {
                        next = Instant::now() + wall_interval(source, state);
                        dirty = true;
                    }
                    Action::Seek(by) => {
                        seek(source, sampler, state, by);
                        next = Instant::now() + wall_interval(source, state);
                        dirty = true;
                    }
                    Action::Speed(k) => {
                        if let Some(r) = state.replay.as_mut() {
                            r.speed =
                                Some(r.speed.map_or(64.0, |s| (s * k).clamp(1.0 / 64.0, 1024.0)));
                        }
                        next = Instant::now() + wall_interval(source, state);
                        dirty = true;
                    }
                },
                Event::Resize(..) => dirty = true,
                _ => {}
            }
            continue;
        }
        if !state.view.paused && Instant::now() >= next {
            sample(source, sampler, state, true);
            next += wall_interval(source, state);
            // After a stall (a suspended terminal), resume on a fresh schedule.
            if next < Instant::now() {
                next = Instant::now() + wall_interval(source, state);
            }
            dirty = true;
        }
    }
}

/// Takes one sample (`advance`: move a replay's clock by one interval first).
fn sample(source: &mut Source, sampler: &mut Sampler, state: &mut State, advance: bool) {
    let interval_ns = u64::try_from(state.view.interval.as_nanos()).unwrap_or(u64::MAX);
    match source {
        Source::Live {
            platform, follower, ..
        } => {
            let ready = match sampler.sample(platform) {
                Ok(r) => r,
                Err(e) => {
                    state.error = Some(crate::error_text(&e));
                    return;
                }
            };
            match follower.after_sample(platform, sampler, ready) {
                Ok(ev) => {
                    if let Some(m) = ev.machine {
                        state.set_machine(m);
                    }
                    state.affinity_changes(&ev.changes);
                }
                Err(e) => state.error = Some(crate::error_text(&e)),
            }
            if ready {
                state.update(sampler);
            }
            state.recording = follower.recording().map(|(p, s)| {
                (
                    p.file_name().map_or(p.display().to_string(), |n| {
                        n.to_string_lossy().into_owned()
                    }),
                    s.bytes,
                )
            });
        }
        Source::Replay { platform } => {
            if platform.finished().unwrap_or(true) {
                if let Some(r) = state.replay.as_mut() {
                    r.ended = true;
                }
                state.view.paused = true;
                return;
            }
            if advance {
                platform.sleep(interval_ns);
            }
            let ready = match sampler.sample(platform) {
                Ok(r) => r,
                Err(e) => {
                    state.error = Some(crate::error_text(&e));
                    return;
                }
            };
            replayed(platform, sampler, state);
            if ready {
                state.update(sampler);
            }
        }
    }
}

/// The inventory and affinity changes a replay read with its last sample.
fn replayed(platform: &ReplayPlatform, sampler: &mut Sampler, state: &mut State) {
    let player = platform.player();
    if player.machine().irqs.len() != state.machine().irqs.len() {
        sampler.set_machine(player.machine());
        state.set_machine(player.machine().clone());
    }
    let changes = replayed_changes(platform, state.machine());
    state.affinity_changes(&changes);
}

/// Replay: moves by `by` ns and shows the interval ending there.
fn seek(source: &mut Source, sampler: &mut Sampler, state: &mut State, by: i64) {
    let Source::Replay { platform } = source else {
        return;
    };
    let interval_ns = u64::try_from(state.view.interval.as_nanos()).unwrap_or(u64::MAX);
    let Some((first, last)) = platform.span_ns() else {
        return;
    };
    let at = state.sample_ns.unwrap_or(first) as i128 + i128::from(by);
    let target = at.clamp(i128::from(first), i128::from(last)) as u64;
    let base = target.saturating_sub(interval_ns).max(first);
    if let Err(e) = platform.seek(base) {
        state.error = Some(e.to_string());
        return;
    }
    sampler.reset();
    if let Some(r) = state.replay.as_mut() {
        r.ended = false;
    }
    state.view.paused = false;
    sample(source, sampler, state, false);
    sample(source, sampler, state, true);
}
