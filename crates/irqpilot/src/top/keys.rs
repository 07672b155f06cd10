//! `top`'s keys. Each changes the view state and says what the loop must do next.
//!
//! | key | does |
//! |---|---|
//! | `q`, Ctrl-C | quit |
//! | `?`, `h` | help |
//! | space, `p` | pause / resume sampling |
//! | `+` / `-` | longer / shorter interval |
//! | Tab | switch panel (CPUs, IRQs) |
//! | `s` / `r` | next sort column / reverse it (focused panel) |
//! | `/` | filter IRQs by device (part of its device, queue or IRQ name) |
//! | `c` | filter by a CPU list (CPU rows, and IRQs that landed there) |
//! | `x`, Esc | clear filters |
//! | `f` | fold CPUs: none, by node, by package |
//! | Enter | open / close the selected CPU group |
//! | arrows, PgUp/PgDn, Home/End, `j`/`k` | move the selection |
//! | left / right, `[` / `]` | replay: seek 10 s / 1 min |
//! | `<` / `>` | replay: half / double speed |

use super::state::{INTERVALS_MS, InputKind, Panel, State};
use crate::top::cpus::CpuRow;
use irqpilot_core::CpuSet;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::time::Duration;

/// What the loop does after a key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// Nothing changed.
    None,
    /// Draw again.
    Redraw,
    /// Leave.
    Quit,
    /// The interval changed: sample on the new schedule.
    Reschedule,
    /// Replay: move this many ns (negative: back).
    Seek(i64),
    /// Replay: multiply the speed.
    Speed(f64),
}

const SEC: i64 = 1_000_000_000;

impl State {
    /// Handles one key event.
    pub fn key(&mut self, k: KeyEvent) -> Action {
        if k.kind == KeyEventKind::Release {
            return Action::None;
        }
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        if self.view.input.is_some() {
            return self.typing(k);
        }
        if self.view.help {
            self.view.help = false;
            return match k.code {
                KeyCode::Char('q') => Action::Quit,
                _ => Action::Redraw,
            };
        }
        self.view.message = None;
        let replay = self.replay.is_some();
        match k.code {
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Char('?' | 'h') => {
                self.view.help = true;
                Action::Redraw
            }
            KeyCode::Char(' ' | 'p') => {
                self.view.paused = !self.view.paused;
                Action::Reschedule
            }
            KeyCode::Char('+' | '=') => self.step_interval(1),
            KeyCode::Char('-' | '_') => self.step_interval(-1),
            KeyCode::Tab | KeyCode::BackTab => {
                self.view.focus = match self.view.focus {
                    Panel::Cpus => Panel::Irqs,
                    Panel::Irqs => Panel::Cpus,
                };
                Action::Redraw
            }
            KeyCode::Char('s') => {
                match self.view.focus {
                    Panel::Cpus => self.view.cpu_sort = self.view.cpu_sort.next(),
                    Panel::Irqs => self.view.irq_sort = self.view.irq_sort.next(),
                }
                self.refilter();
                Action::Redraw
            }
            KeyCode::Char('r') => {
                match self.view.focus {
                    Panel::Cpus => self.view.cpu_reverse = !self.view.cpu_reverse,
                    Panel::Irqs => self.view.irq_reverse = !self.view.irq_reverse,
                }
                self.refilter();
                Action::Redraw
            }
            KeyCode::Char('/') => {
                let cur = self.view.device_filter.clone().unwrap_or_default();
                self.view.input = Some((InputKind::Device, cur));
                Action::Redraw
            }
            KeyCode::Char('c') => {
                let cur = self
                    .view
                    .cpu_filter
                    .as_ref()
                    .map(CpuSet::to_string)
                    .unwrap_or_default();
                self.view.input = Some((InputKind::Cpus, cur));
                Action::Redraw
            }
            KeyCode::Char('x') | KeyCode::Esc => {
                self.view.device_filter = None;
                self.view.cpu_filter = None;
                self.refilter();
                Action::Redraw
            }
            KeyCode::Char('f') => {
                self.view.fold = self.view.fold.next();
                self.view.cpu_selected = 0;
                self.refilter();
                Action::Redraw
            }
            KeyCode::Enter => self.toggle_group(),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::PageUp => self.move_selection(-(self.page_rows() as i64)),
            KeyCode::PageDown => self.move_selection(self.page_rows() as i64),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(i64::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(i64::MAX / 2),
            KeyCode::Left if replay => Action::Seek(-10 * SEC),
            KeyCode::Right if replay => Action::Seek(10 * SEC),
            KeyCode::Char('[') if replay => Action::Seek(-60 * SEC),
            KeyCode::Char(']') if replay => Action::Seek(60 * SEC),
            KeyCode::Char('<' | ',') if replay => Action::Speed(0.5),
            KeyCode::Char('>' | '.') if replay => Action::Speed(2.0),
            _ => Action::None,
        }
    }

    fn typing(&mut self, k: KeyEvent) -> Action {
        let Some((kind, text)) = self.view.input.as_mut() else {
            return Action::None;
        };
        match k.code {
            KeyCode::Esc => self.view.input = None,
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) if text.len() < 200 => text.push(c),
            KeyCode::Enter => {
                let (kind, text) = (*kind, text.trim().to_string());
                self.view.input = None;
                match kind {
                    InputKind::Device => {
                        self.view.device_filter = (!text.is_empty()).then_some(text);
                    }
                    InputKind::Cpus if text.is_empty() => self.view.cpu_filter = None,
                    InputKind::Cpus => match CpuSet::parse_list(&text) {
                        Ok(set) => self.view.cpu_filter = Some(set),
                        Err(e) => self.view.message = Some(format!("bad CPU list {text:?}: {e}")),
                    },
                }
                self.view.cpu_selected = 0;
                self.view.irq_selected = 0;
                self.refilter();
            }
            _ => return Action::None,
        }
        Action::Redraw
    }

    fn step_interval(&mut self, dir: i64) -> Action {
        let ms = u64::try_from(self.view.interval.as_millis()).unwrap_or(u64::MAX);
        let next = if dir > 0 {
            INTERVALS_MS.iter().find(|v| **v > ms)
        } else {
            INTERVALS_MS.iter().rev().find(|v| **v < ms)
        };
        match next {
            Some(v) => {
                self.view.interval = Duration::from_millis(*v);
                Action::Reschedule
            }
            None => Action::None,
        }
    }

    fn rows_in_focus(&self) -> usize {
        match self.view.focus {
            Panel::Cpus => self.cpu_rows.len(),
            Panel::Irqs => self.irqs.len(),
        }
    }

    fn move_selection(&mut self, by: i64) -> Action {
        let n = self.rows_in_focus() as i64;
        let sel = match self.view.focus {
            Panel::Cpus => &mut self.view.cpu_selected,
            Panel::Irqs => &mut self.view.irq_selected,
        };
        let next = (*sel as i64).saturating_add(by).clamp(0, (n - 1).max(0));
        *sel = next as usize;
        Action::Redraw
    }

    fn toggle_group(&mut self) -> Action {
        if self.view.focus != Panel::Cpus {
            return Action::None;
        }
        let Some(CpuRow::Group { name, .. }) = self.cpu_rows.get(self.view.cpu_selected) else {
            return Action::None;
        };
        let name = name.clone();
        if !self.view.open.remove(&name) {
            self.view.open.insert(name);
        }
        self.refilter();
        Action::Redraw
    }
}
