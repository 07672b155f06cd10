//! e1000/igb adaptive interrupt moderation (AIM), as re-added to FreeBSD em/igb
//! ("e1000: Re-add AIM", moderation.md section 3.1).
//!
//! On every queue interrupt the driver classifies the traffic since the previous interrupt
//! (bytes, packets, bytes per packet, the larger of RX and TX) into *lowest* (70,000 int/s),
//! *low* (20,000) or *bulk* (4,000) latency, and programs the interrupt throttle register. The
//! register is a holdoff timer (minimum gap between interrupts), so the programmed "rate" is a
//! cap, reached only under load. Modes (`enable_aim`): 0 = static `max_interrupt_rate`
//! (8,000/s), 1 = adaptive without the lowest state, 2 = adaptive with it.

use serde::{Deserialize, Serialize};

/// Default static rate (`EM_INTS_DEFAULT`, FreeBSD `max_interrupt_rate`).
pub const DEFAULT_MAX_INTERRUPT_RATE: u32 = 8000;
/// Rate of the lowest-latency state.
pub const LOWEST_RATE: u32 = 70_000;
/// Rate of the low-latency state.
pub const LOW_RATE: u32 = 20_000;
/// Rate of the bulk state.
pub const BULK_RATE: u32 = 4000;

/// Latency class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Latency {
    /// AIM off or bootstrapping: static rate.
    Disabled,
    /// 70,000 int/s.
    Lowest,
    /// 20,000 int/s.
    Low,
    /// 4,000 int/s.
    Bulk,
}

/// `enable_aim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AimMode {
    /// 0: static `max_interrupt_rate`.
    Off,
    /// 1: adaptive, lowest state trimmed to low (the new default).
    Normal,
    /// 2: adaptive including the lowest state ("low latency").
    LowLatency,
}

impl AimMode {
    /// From the sysctl value.
    pub fn from_sysctl(v: u8) -> Option<AimMode> {
        match v {
            0 => Some(AimMode::Off),
            1 => Some(AimMode::Normal),
            2 => Some(AimMode::LowLatency),
            _ => None,
        }
    }
}

/// How the throttle register encodes an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ItrRegister {
    /// em/lem `ITR`: interval in 256 ns units (`EM_INTS_TO_ITR(i) = 1e9 / (i * 256)`).
    Em,
    /// igb `EITR`: interval in 1 us units, multiple of 4 us (`((1e6 / i) & 0x7FFC)`).
    Igb,
}

impl ItrRegister {
    /// The register value for an interrupt rate (integer division as the driver does).
    pub fn encode(self, rate_per_sec: u32) -> u32 {
        let rate = rate_per_sec.max(1);
        match self {
            ItrRegister::Em => 1_000_000_000 / (rate * 256),
            ItrRegister::Igb => (1_000_000 / rate) & 0x7FFC,
        }
    }

    /// Minimum gap between interrupts, in ns, that a register value programs.
    pub fn interval_ns(self, reg: u32) -> u64 {
        match self {
            ItrRegister::Em => reg as u64 * 256,
            ItrRegister::Igb => reg as u64 * 1000,
        }
    }

    /// The rate the driver reports for a register value (FreeBSD `interrupt_rate` sysctl):
    /// `1e9 / interval`, e.g. 20,032 for an em queue programmed for 20,000.
    pub fn reported_rate(self, reg: u32) -> u32 {
        let ns = self.interval_ns(reg);
        1_000_000_000u64.checked_div(ns).unwrap_or(0) as u32
    }
}

/// Traffic since the previous interrupt on one queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// RX bytes.
    pub rx_bytes: u64,
    /// RX packets.
    pub rx_packets: u64,
    /// TX bytes (a TSO segment counts all its bytes as one packet).
    pub tx_bytes: u64,
    /// TX packets.
    pub tx_packets: u64,
}

/// One queue's AIM state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aim {
    mode: AimMode,
    register: ItrRegister,
    max_interrupt_rate: u32,
    link_mbps: u32,
    latency: Latency,
    reg: u32,
}

impl Aim {
    /// A queue at boot: throttle programmed to `max_interrupt_rate`, state bootstrapping.
    pub fn new(mode: AimMode, register: ItrRegister, link_mbps: u32) -> Aim {
        let max = DEFAULT_MAX_INTERRUPT_RATE;
        Aim {
            mode,
            register,
            max_interrupt_rate: max,
            link_mbps,
            latency: Latency::Disabled,
            reg: register.encode(max),
        }
    }

    /// Overrides the static rate used by mode 0.
    pub fn with_max_interrupt_rate(mut self, rate: u32) -> Aim {
        self.max_interrupt_rate = rate.max(1);
        self.reg = self.register.encode(self.max_interrupt_rate);
        self
    }

    /// Current latency class.
    pub fn latency(&self) -> Latency {
        self.latency
    }

    /// Current register value.
    pub fn register_value(&self) -> u32 {
        self.reg
    }

    /// Minimum gap between interrupts now programmed, in ns.
    pub fn interval_ns(&self) -> u64 {
        self.register.interval_ns(self.reg)
    }

    /// The rate the driver reports (`interrupt_rate` sysctl).
    pub fn reported_rate(&self) -> u32 {
        self.register.reported_rate(self.reg)
    }

    /// Runs the classifier for one interrupt; returns `true` when the register changed.
    pub fn on_interrupt(&mut self, c: Counts) -> bool {
        if c.rx_bytes == 0 && c.tx_bytes == 0 {
            return false; // idle: keep the current value
        }
        let rate = if self.mode == AimMode::Off {
            self.latency = Latency::Disabled;
            self.max_interrupt_rate
        } else if self.link_mbps < 1000 {
            BULK_RATE
        } else {
            let bytes = c.rx_bytes.max(c.tx_bytes);
            let bpp = |b: u64, n: u64| b.checked_div(n).unwrap_or(0);
            let bpp = bpp(c.tx_bytes, c.tx_packets).max(bpp(c.rx_bytes, c.rx_packets));
            let pkts = c.rx_packets.max(c.tx_packets);
            let mut next = match self.latency {
                Latency::Disabled => Latency::Low,
                Latency::Lowest => {
                    if bpp > 8000 {
                        Latency::Bulk
                    } else if pkts < 5 && bytes > 512 {
                        Latency::Low
                    } else {
                        Latency::Lowest
                    }
                }
                Latency::Low => {
                    if bytes > 10_000 {
                        // TSO segments make bytes/packet large: that is bulk traffic too.
                        if bpp > 8000 || pkts < 10 || bpp > 1200 {
                            Latency::Bulk
                        } else if pkts > 35 {
                            Latency::Lowest
                        } else {
                            Latency::Low
                        }
                    } else if bpp > 2000 {
                        Latency::Bulk
                    } else if pkts < 3 && bytes < 512 {
                        Latency::Lowest
                    } else {
                        Latency::Low
                    }
                }
                Latency::Bulk => {
                    if bytes > 25_000 {
                        if pkts > 35 {
                            Latency::Low
                        } else {
                            Latency::Bulk
                        }
                    } else if bytes < 1500 {
                        Latency::Low
                    } else {
                        Latency::Bulk
                    }
                }
            };
            if self.mode == AimMode::Normal && next == Latency::Lowest {
                next = Latency::Low;
            }
            self.latency = next;
            match next {
                Latency::Lowest => LOWEST_RATE,
                Latency::Low => LOW_RATE,
                Latency::Bulk => BULK_RATE,
                Latency::Disabled => self.max_interrupt_rate,
            }
        };
        let reg = self.register.encode(rate);
        let changed = reg != self.reg;
        self.reg = reg;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_encodings_match_the_driver() {
        // The FreeBSD tester saw these exact values in dev.em.N.queue_rx_0.interrupt_rate.
        assert_eq!(ItrRegister::Em.encode(20_000), 195);
        assert_eq!(ItrRegister::Em.reported_rate(195), 20_032);
        assert_eq!(
            ItrRegister::Em.reported_rate(ItrRegister::Em.encode(70_000)),
            71_022
        );
        assert_eq!(ItrRegister::Em.encode(8000), 488);
        assert_eq!(ItrRegister::Em.reported_rate(488), 8004);
        assert_eq!(ItrRegister::Igb.encode(4000), 248);
        assert_eq!(ItrRegister::Igb.encode(20_000), 48);
    }

    fn small() -> Counts {
        Counts {
            rx_bytes: 98,
            rx_packets: 1,
            tx_bytes: 98,
            tx_packets: 1,
        }
    }

    fn tso_bulk() -> Counts {
        Counts {
            rx_bytes: 1040,
            rx_packets: 16,
            tx_bytes: 4 * 65_160,
            tx_packets: 4,
        }
    }

    #[test]
    fn mode_states() {
        let mut off = Aim::new(AimMode::Off, ItrRegister::Em, 1000);
        off.on_interrupt(tso_bulk());
        assert_eq!(off.reported_rate(), 8004);

        let mut normal = Aim::new(AimMode::Normal, ItrRegister::Em, 1000);
        normal.on_interrupt(small());
        normal.on_interrupt(small());
        assert_eq!(normal.latency(), Latency::Low); // lowest is trimmed in mode 1
        assert_eq!(normal.reported_rate(), 20_032);
        normal.on_interrupt(tso_bulk());
        assert_eq!(normal.latency(), Latency::Bulk);
        assert_eq!(normal.reported_rate(), 4002);

        let mut ll = Aim::new(AimMode::LowLatency, ItrRegister::Em, 1000);
        ll.on_interrupt(small());
        ll.on_interrupt(small());
        assert_eq!(ll.latency(), Latency::Lowest);
        assert_eq!(ll.reported_rate(), 71_022);
    }

    #[test]
    fn idle_keeps_value_and_slow_links_are_bulk() {
        let mut a = Aim::new(AimMode::LowLatency, ItrRegister::Em, 1000);
        a.on_interrupt(small());
        let before = a.register_value();
        assert!(!a.on_interrupt(Counts::default()));
        assert_eq!(a.register_value(), before);
        let mut slow = Aim::new(AimMode::Normal, ItrRegister::Em, 100);
        slow.on_interrupt(small());
        assert_eq!(slow.reported_rate(), 4002);
    }

    #[test]
    fn bulk_returns_to_low_when_traffic_thins() {
        let mut a = Aim::new(AimMode::Normal, ItrRegister::Igb, 1000);
        a.on_interrupt(small());
        a.on_interrupt(tso_bulk());
        assert_eq!(a.latency(), Latency::Bulk);
        a.on_interrupt(Counts {
            rx_bytes: 600,
            rx_packets: 3,
            tx_bytes: 200,
            tx_packets: 2,
        });
        assert_eq!(a.latency(), Latency::Low);
    }
}
