//! Workloads and the device data paths they drive (NIC wire/DMA, NVMe media/DMA).
//!
//! Packets are aggregated into trains: a bulk sender's TSO burst crosses the wire back to back,
//! so one event carries the whole train and the receive ring learns each packet's landing time
//! arithmetically (see `cq.rs`). The simulator therefore reports simulated packets per second
//! rather than events per packet.

use crate::config::WorkloadCfg;
use crate::config::positive;
use crate::cq::{EntryKind, NO_TAG};
use crate::model::*;
use crate::sim::Sim;
use crate::time::{SimTime, us_to_ns};

/// A flow's 32-bit hash, as the NIC computes it for RSS and the stack keeps in `skb->hash`
/// (RPS and RFS index their tables with it): a fixed multiplicative hash, deterministic and
/// spreading consecutive flows. RSS takes it modulo the queues; RPS scales it to its CPUs
/// (`reciprocal_scale`), so the two use different bits of one hash.
pub(crate) fn flow_hash(flow: u32) -> u32 {
    ((flow as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

/// Resolves a bulk workload's parameters (`None` for other kinds).
pub(crate) fn bulk_params(
    sc: &crate::config::Scenario,
    nics: &[Nic],
    wi: usize,
) -> Option<BulkParams> {
    match &sc.workload[wi] {
        WorkloadCfg::Bulk {
            nic,
            load,
            flows,
            window_kb,
            chunk_kb,
            wire_rtt_us,
            jitter_us,
            ..
        } => {
            let ni = nic_index(sc, nic)?;
            let n = &nics[ni];
            let mtu = n.mtu as u64;
            let whole = |kb: f64| (((kb * 1024.0) as u64).div_ceil(mtu)).max(1) * mtu;
            let nflows = if *flows == 0 { 4 * n.queues } else { *flows };
            let chunk = whole(*chunk_kb);
            Some(BulkParams {
                nic: ni,
                pace_bps: n.link_bps * load / nflows as f64,
                window: whole(*window_kb).max(chunk),
                chunk,
                rtt_ns: us_to_ns(*wire_rtt_us),
                jitter_ns: jitter_us.max(0.0) * 1000.0,
                stop_ns: sc.workload[wi].stop_ns(),
            })
        }
        _ => None,
    }
}

impl Sim {
    pub(crate) fn start_workloads(&mut self) {
        for wi in 0..self.sc.workload.len() {
            let wl = wi as u16;
            let start = self.sc.workload[wi].start_ns();
            if self.sc.workload[wi].probe_per_sec() > 0.0 {
                let t = start + self.poisson_gap(wi);
                self.events.push(SimTime(t), Ev::PoissonArrive { wl });
            }
            match self.sc.workload[wi].clone() {
                WorkloadCfg::Bulk {
                    nic,
                    flows,
                    hot_fraction,
                    ..
                } => {
                    let Some(ni) = nic_index(&self.sc, &nic) else {
                        continue;
                    };
                    let n = &self.nics[ni];
                    let nflows = if flows == 0 { 4 * n.queues } else { flows };
                    let hot = (hot_fraction.clamp(0.0, 1.0) * nflows as f64).round() as u32;
                    for f in 0..nflows {
                        let q = if f < hot {
                            n.first_q
                        } else {
                            self.rss_queue(ni, f)
                        };
                        self.wls[wi].flows.push(Flow {
                            delivered: 0,
                            q,
                            inflight: 0,
                            next_send: SimTime::ZERO,
                        });
                    }
                    // Senders start at random times within the first 20 us; paced below the
                    // link (load < 1), within one chunk's pacing gap. Equal gaps keep the phase
                    // a sender starts with, and senders started together would send in
                    // lock-step bursts with the link idle between them for the whole run (a
                    // low-load probe then waits behind a burst one time in 1/load). At load >=
                    // 1 the link is busy throughout and there is no idle time to line up in.
                    let spread = match self.wls[wi].bulk {
                        Some(b) if b.pace_bps * (nflows as f64) < n.link_bps => {
                            ((b.chunk as f64 * 8.0 / b.pace_bps * 1e9) as u64).max(20_000)
                        }
                        _ => 20_000,
                    };
                    for f in 0..nflows {
                        let t = start + self.wls[wi].rng.below(spread);
                        self.wls[wi].flows[f as usize].next_send = SimTime(t);
                        self.flow_send(wl, f, SimTime(t));
                    }
                }
                WorkloadCfg::BulkTx { nic, .. } => {
                    let Some(ni) = nic_index(&self.sc, &nic) else {
                        continue;
                    };
                    let n = &self.nics[ni];
                    for q in n.first_q..n.first_q + n.queues {
                        let gap = self.train_gap_ns(wi, ni);
                        let t = start + self.wls[wi].rng.below(gap.max(1));
                        self.events.push(SimTime(t), Ev::TxSegment { wl, q });
                    }
                }
                WorkloadCfg::Rpc {
                    clients, think_us, ..
                } => {
                    for c in 0..clients.min(0x00ff_ffff) {
                        // Spread the first requests over one think time (or 10 us).
                        let spread = us_to_ns(think_us).max(10_000);
                        let t = start + self.wls[wi].rng.below(spread);
                        self.events
                            .push(SimTime(t), Ev::ClientSend { wl, client: c });
                    }
                }
                WorkloadCfg::Poisson { .. } => {
                    let t = start + self.poisson_gap(wi);
                    self.events.push(SimTime(t), Ev::PoissonArrive { wl });
                }
                WorkloadCfg::Fio {
                    nvme,
                    iodepth,
                    jobs,
                    rate_iops,
                    ..
                } => {
                    let qs: Vec<u32> = (0..self.vq.len() as u32)
                        .filter(|&q| {
                            self.drives[self.vq[q as usize].drive as usize]
                                .name
                                .starts_with(&nvme)
                        })
                        .collect();
                    let stop = self.sc.workload[wi].stop_ns();
                    let per_queue_rate = rate_iops * jobs as f64;
                    let gap_ns = if positive(per_queue_rate) {
                        (1e9 / per_queue_rate) as u64
                    } else {
                        0
                    };
                    for q in qs {
                        self.vq[q as usize].jobs.push(FioJobs {
                            wl,
                            gap_ns,
                            next_submit: SimTime(start),
                            stop_ns: stop,
                            completed: 0,
                        });
                        let j = self.vq[q as usize].jobs.len() - 1;
                        // Start staggered: one I/O at a time over the first media latency,
                        // or a rate-limited queue's schedule from a phase of its own.
                        let lat = self.drives[self.vq[q as usize].drive as usize].latency_ns;
                        let spread = lat.max(gap_ns).max(1);
                        if gap_ns > 0 {
                            let phase = self.wls[wi].rng.below(spread);
                            self.vq[q as usize].jobs[j].next_submit = SimTime(start + phase);
                        }
                        for _ in 0..iodepth.saturating_mul(jobs) {
                            let t = if gap_ns > 0 {
                                start
                            } else {
                                start + self.wls[wi].rng.below(spread)
                            };
                            self.nvme_submit_paced(q, j, SimTime(t));
                        }
                    }
                }
            }
        }
    }

    /// Mean gap between trains (or TSO segments) on one queue of a bulk workload.
    fn train_gap_ns(&self, wi: usize, ni: usize) -> u64 {
        let (load, kb) = match &self.sc.workload[wi] {
            WorkloadCfg::BulkTx { load, tso_kb, .. } => (*load, *tso_kb),
            _ => return u64::MAX,
        };
        let n = &self.nics[ni];
        let per_queue_bps = n.link_bps * load / n.queues as f64;
        if !positive(per_queue_bps) {
            return u64::MAX / 4;
        }
        (kb as f64 * 1024.0 * 8.0 / per_queue_bps * 1e9) as u64
    }

    fn poisson_gap(&mut self, wi: usize) -> u64 {
        let rate = match &self.sc.workload[wi] {
            WorkloadCfg::Poisson { rate_per_sec, .. } => *rate_per_sec,
            w => w.probe_per_sec(),
        };
        if !positive(rate) {
            return u64::MAX / 4;
        }
        self.wls[wi].rng.exp_ns(1e9 / rate).max(1)
    }

    /// `n` packets of `bytes` for NIC queue `q` reach the NIC's link at `now`.
    ///
    /// The link and the NIC's DMA are shared packet by packet among the trains in flight (a
    /// switch interleaves many senders), so a queue receives the share of its own trains: with
    /// `k` trains in flight on the link and `kq` of them for this queue, its packets land
    /// `k / kq x max(wire, DMA)` apart. A queue's trains land in order (its ring stays FIFO).
    /// DMA time is wire time divided by the platform's DMA efficiency, so above the MSI knee
    /// everything slows down. Packets that find the RX ring full are dropped.
    pub(crate) fn nic_rx(&mut self, q: u32, n: u32, bytes: u32, tag: u32, aux: u64) -> u32 {
        let now = self.now;
        let eff = self.plat.efficiency(now);
        let nqi = q as usize;
        let ni = self.nq[nqi].nic as usize;
        // Retire trains that have fully landed.
        while let Some(&std::cmp::Reverse((end, qq))) = self.nics[ni].active.peek() {
            if end > now.ns() {
                break;
            }
            self.nics[ni].active.pop();
            self.nics[ni].busy_queues -= 1; // counts trains in flight
            self.nq[qq as usize].trains -= 1;
        }
        let nic = &mut self.nics[ni];
        let wire_ns = bytes as f64 * 8.0 / nic.link_bps * 1e9;
        let per_pkt = wire_ns / eff.min(1.0);
        let nq = &mut self.nq[nqi];
        let k = nic.busy_queues as f64 + 1.0;
        let kq = nq.trains as f64 + 1.0;
        let spacing = per_pkt * k / kq;
        let t0 = now.max(nq.link_free).after(spacing as u64);
        let end = t0.after((spacing * (n - 1) as f64) as u64);
        nic.busy_queues += 1;
        nq.trains += 1;
        nq.link_free = end.after(1);
        nic.active.push(std::cmp::Reverse((nq.link_free.ns(), q)));
        let landed = nq
            .rx
            .push(t0, spacing as u32, n, bytes, EntryKind::Rx, tag, aux);
        self.nics[ni].dropped += (n - landed) as u64;
        let s = self.nq[nqi].src;
        self.schedule_fire(s);
        landed
    }

    /// Sends as many chunks as the flow's window allows, once the ACK that frees the window has
    /// reached the sender at `ack_at`; each reaches the NIC half a round trip later.
    fn flow_send(&mut self, wl: u16, flow: u32, ack_at: SimTime) {
        let wi = wl as usize;
        let w = &mut self.wls[wi];
        let Some(BulkParams {
            pace_bps,
            window,
            chunk,
            rtt_ns: rtt,
            jitter_ns,
            stop_ns: stop,
            ..
        }) = w.bulk
        else {
            return;
        };
        let f = &mut w.flows[flow as usize];
        while f.inflight + chunk <= window {
            let send = ack_at.max(f.next_send);
            if send.ns() >= stop {
                break;
            }
            f.next_send = send.after((chunk as f64 * 8.0 / pace_bps * 1e9) as u64);
            f.inflight += chunk;
            let jitter = if jitter_ns > 0.0 {
                w.rng.exp_ns(jitter_ns)
            } else {
                0
            };
            self.events
                .push(send.after(rtt / 2 + jitter), Ev::Chunk { wl, flow });
        }
    }

    /// The receiver consumed `bytes` of a flow: the ACK goes back and frees window.
    pub(crate) fn flow_consumed(&mut self, wl: u16, flow: u32, bytes: u64) {
        let wi = wl as usize;
        let Some(BulkParams {
            rtt_ns: rtt,
            window,
            chunk,
            ..
        }) = self.wls[wi].bulk
        else {
            return;
        };
        let Some(f) = self.wls[wi].flows.get_mut(flow as usize) else {
            return;
        };
        f.inflight = f.inflight.saturating_sub(bytes);
        f.delivered += bytes;
        if f.inflight + chunk > window {
            return; // the window is still too full for a chunk: nothing to send
        }
        let ack_at = self.now.after(rtt / 2);
        self.flow_send(wl, flow, ack_at);
    }

    pub(crate) fn on_chunk(&mut self, wl: u16, flow: u32) {
        let wi = wl as usize;
        let Some(BulkParams { nic: ni, chunk, .. }) = self.wls[wi].bulk else {
            return;
        };
        let q = self.wls[wi].flows[flow as usize].q;
        let mtu = self.nics[ni].mtu as u64;
        let pkts = chunk.div_ceil(mtu) as u32;
        let tag = ((wl as u32) << 24) | (flow & 0x00ff_ffff);
        // `aux = MAX` marks bulk batches (the consumer credits bytes back to the flow).
        let lost = pkts - self.nic_rx(q, pkts, mtu as u32, tag, u64::MAX);
        // The model has no loss recovery: a dropped packet's bytes are released at once so the
        // flow does not stall (as if retransmitted instantly); drops are counted and reported.
        if lost > 0 {
            self.flow_consumed(wl, flow, lost as u64 * mtu);
        }
    }

    /// A TSO segment leaves on queue `q`: its completion lands when the wire has sent it, and the
    /// receiver's ACKs (one per two segments of MTU) come back as small RX packets.
    pub(crate) fn on_tx_segment(&mut self, wl: u16, q: u32) {
        let wi = wl as usize;
        let now = self.now;
        let qi = q as usize;
        let ni = self.nq[qi].nic as usize;
        let kb = match &self.sc.workload[wi] {
            WorkloadCfg::BulkTx { tso_kb, .. } => *tso_kb,
            _ => return,
        };
        let bytes = kb * 1024;
        let nic = &mut self.nics[ni];
        let wire_ns = bytes as f64 * 8.0 / nic.link_bps * 1e9;
        let start = now.max(nic.wire_tx_free);
        let done = start.after(wire_ns as u64);
        nic.wire_tx_free = done;
        let mtu = nic.mtu;
        self.nq[qi]
            .tx
            .push(done, 0, 1, bytes, EntryKind::TxDone, NO_TAG, 0);
        // Receivers with GRO acknowledge roughly every 8 MSS of a burst.
        let acks = (bytes / mtu / 8).max(1);
        let ack_spacing = (wire_ns / acks as f64) as u32;
        self.nq[qi].rx.push(
            start.after(ack_spacing as u64),
            ack_spacing,
            acks,
            66,
            EntryKind::Rx,
            NO_TAG,
            0,
        );
        let s = self.nq[qi].src;
        self.schedule_fire(s);
        let gap = self.train_gap_ns(wi, ni);
        let next = now.after(gap.max(1));
        if next.ns() < self.sc.workload[wi].stop_ns() {
            self.events.push(next, Ev::TxSegment { wl, q });
        }
    }

    /// Which queue RSS puts a flow on.
    fn rss_queue(&self, ni: usize, flow: u32) -> u32 {
        let n = &self.nics[ni];
        let h = u64::from(flow_hash(flow));
        n.first_q + (h % n.channels.max(1) as u64) as u32
    }

    /// Re-hashes the bulk flows of NIC `ni` after its channel count changed (hot flows stay on
    /// the first queue).
    pub(crate) fn rehash_flows(&mut self, ni: usize) {
        let first = self.nics[ni].first_q;
        for wi in 0..self.wls.len() {
            if self.wls[wi].bulk.map(|b| b.nic) != Some(ni) {
                continue;
            }
            for f in 0..self.wls[wi].flows.len() {
                if self.wls[wi].flows[f].q != first {
                    let q = self.rss_queue(ni, f as u32);
                    self.wls[wi].flows[f].q = q;
                }
            }
        }
    }

    fn rpc_params(&self, wi: usize) -> Option<(usize, f64, u32, u32, f64)> {
        match &self.sc.workload[wi] {
            WorkloadCfg::Rpc {
                nic,
                think_us,
                request_bytes,
                response_bytes,
                wire_rtt_us,
                ..
            } => Some((
                nic_index(&self.sc, nic)?,
                *think_us,
                *request_bytes,
                *response_bytes,
                *wire_rtt_us,
            )),
            WorkloadCfg::Poisson {
                nic, request_bytes, ..
            } => Some((
                nic_index(&self.sc, nic)?,
                0.0,
                *request_bytes,
                *request_bytes,
                0.0,
            )),
            // A bulk workload's latency probe: 128-byte requests answered at once.
            WorkloadCfg::Bulk { nic, .. } | WorkloadCfg::BulkTx { nic, .. } => {
                Some((nic_index(&self.sc, nic)?, 0.0, 128, 128, 0.0))
            }
            _ => None,
        }
    }

    fn set_sent(&mut self, wl: u16, client: u32, at: u64) {
        let sent = &mut self.wls[wl as usize].sent;
        if sent.len() <= client as usize {
            sent.resize(client as usize + 1, 0);
        }
        sent[client as usize] = at;
    }

    pub(crate) fn on_client_send(&mut self, wl: u16, client: u32) {
        let Some((_, _, _, _, wire)) = self.rpc_params(wl as usize) else {
            return;
        };
        self.set_sent(wl, client, self.now.ns());
        self.events.push(
            self.now.after(us_to_ns(wire) / 2),
            Ev::Request { wl, client },
        );
    }

    pub(crate) fn on_request(&mut self, wl: u16, client: u32) {
        let Some((ni, _, req_bytes, _, _)) = self.rpc_params(wl as usize) else {
            return;
        };
        let sent = self.wls[wl as usize]
            .sent
            .get(client as usize)
            .copied()
            .unwrap_or(0);
        let q = match self.sc.workload[wl as usize] {
            WorkloadCfg::Rpc { queue: Some(q), .. } => self.nics[ni].first_q + q,
            _ => self.rss_queue(ni, client),
        };
        let tag = ((wl as u32) << 24) | (client & 0x00ff_ffff);
        self.nic_rx(q, 1, req_bytes, tag, sent);
    }

    pub(crate) fn on_poisson(&mut self, wl: u16) {
        let wi = wl as usize;
        let id = self.wls[wi].next_id & 0x00ff_ffff;
        self.wls[wi].next_id = self.wls[wi].next_id.wrapping_add(1);
        // Poisson requests are identified by their arrival time directly (no table entry).
        let sent = self.now.ns();
        self.on_poisson_request(wl, id, sent);
        let gap = self.poisson_gap(wi);
        self.events
            .push(self.now.after(gap), Ev::PoissonArrive { wl });
    }

    fn on_poisson_request(&mut self, wl: u16, id: u32, sent: u64) {
        let Some((ni, _, req_bytes, _, _)) = self.rpc_params(wl as usize) else {
            return;
        };
        let q = self.rss_queue(ni, id);
        let id = match self.sc.workload[wl as usize] {
            WorkloadCfg::Poisson { .. } => id & 0x00ff_ffff,
            _ => (id & (PROBE_BIT - 1)) | PROBE_BIT,
        };
        let tag = ((wl as u32) << 24) | id;
        self.nic_rx(q, 1, req_bytes, tag, sent);
    }

    /// The server application answered a request: the response leaves on the same queue (its
    /// TX completion lands on the queue's vector) and reaches the client half a wire RTT later.
    pub(crate) fn respond(&mut self, wl: u16, q: u32, client: u32, sent: u64) {
        let wi = wl as usize;
        let Some((ni, think, _, resp_bytes, wire)) = self.rpc_params(wi) else {
            return;
        };
        let now = self.now;
        let nic = &mut self.nics[ni];
        let wire_ns = resp_bytes as f64 * 8.0 / nic.link_bps * 1e9;
        let start = now.max(nic.wire_tx_free);
        let done = start.after(wire_ns as u64);
        nic.wire_tx_free = done;
        self.nq[q as usize]
            .tx
            .push(done, 0, 1, resp_bytes, EntryKind::TxDone, NO_TAG, 0);
        let s = self.nq[q as usize].src;
        self.schedule_fire(s);
        let received = done.after(us_to_ns(wire) / 2);
        self.m
            .record_latency(received.since(SimTime(sent)), 1, Some(wl));
        let rpc = matches!(self.sc.workload[wi], WorkloadCfg::Rpc { .. });
        if self.m.counting() && client & PROBE_BIT == 0 {
            self.m.c.transactions += 1;
        }
        if rpc {
            let done = &mut self.wls[wi].done;
            if done.len() <= client as usize {
                done.resize(client as usize + 1, 0);
            }
            done[client as usize] += 1;
        }
        if let WorkloadCfg::Rpc { stop_ms, .. } = self.sc.workload[wi] {
            if stop_ms > 0 && received.ns() >= stop_ms.saturating_mul(1_000_000) {
                return;
            }
            let think_ns = self.wls[wi].rng.exp_ns(us_to_ns(think) as f64);
            self.events
                .push(received.after(think_ns), Ev::ClientSend { wl, client });
        }
    }

    /// Workload `wl`'s jobs resubmit `n` reads on queue `q` after reaping them: at once, or
    /// paced by their `rate_iops`; none once they have stopped.
    pub(crate) fn nvme_resubmit(&mut self, q: u32, n: u32, wl: u16) {
        let now = self.now;
        let Some(j) = self.vq[q as usize].jobs.iter().position(|j| j.wl == wl) else {
            return;
        };
        let jobs = &self.vq[q as usize].jobs[j];
        if now.ns() >= jobs.stop_ns {
            return;
        }
        if jobs.gap_ns == 0 {
            self.nvme_submit_at(q, n, now, wl);
        } else {
            for _ in 0..n {
                self.nvme_submit_paced(q, j, now);
            }
        }
    }

    /// One read of the `j`-th jobs of queue `q` at `t` or, under a rate limit, when the limit
    /// next allows. A read due later waits for its time as an event: submitted ahead, it would
    /// hold the drive's DMA for everyone's reads until then.
    ///
    /// The limit is fio's linear rate process (`usec_for_io`, `rate_ddir`): read k is due k
    /// gaps after the schedule began, and a job behind it issues at once until it has caught
    /// up. Timing each read from the one before instead shifts a job's phase for good after
    /// any wait: queues whose reads were held together (a coalescing timer) would stay in step
    /// and share their drive's DMA for the rest of the run (held-out gen-142-11, 192 paced
    /// queues at iodepth 1: p95 1.45x `none` seconds after the last read was held).
    fn nvme_submit_paced(&mut self, q: u32, j: usize, t: SimTime) {
        let jobs = &mut self.vq[q as usize].jobs[j];
        let at = t.max(jobs.next_submit);
        jobs.next_submit = if jobs.gap_ns == 0 {
            at
        } else {
            jobs.next_submit.after(jobs.gap_ns)
        };
        if at.ns() >= jobs.stop_ns {
            return;
        }
        if at > self.now {
            self.events.push(
                at,
                Ev::FioSubmit {
                    q,
                    job: j.min(u16::MAX as usize) as u16,
                },
            );
        } else {
            let wl = jobs.wl;
            self.nvme_submit_at(q, 1, at, wl);
        }
    }

    /// A read of the `j`-th jobs of queue `q` whose time has come.
    pub(crate) fn fio_submit_due(&mut self, q: u32, j: usize) {
        let Some(jobs) = self.vq.get(q as usize).and_then(|v| v.jobs.get(j)) else {
            return;
        };
        if self.now.ns() < jobs.stop_ns {
            let (now, wl) = (self.now, jobs.wl);
            self.nvme_submit_at(q, 1, now, wl);
        }
    }

    /// `n` reads submitted on NVMe queue `q` at `t`: media latency (±10%), then DMA on the
    /// drive's link at its bandwidth times the platform's DMA efficiency; each completion lands
    /// when its data has.
    pub(crate) fn nvme_submit_at(&mut self, q: u32, n: u32, t: SimTime, wl: u16) {
        let qi = q as usize;
        let di = self.vq[qi].drive as usize;
        let eff = self.plat.efficiency(self.now);
        let d = &mut self.drives[di];
        d.in_flight += n as u64;
        let jitter = 0.9 + 0.2 * d.rng.unit();
        let media = t.after((d.latency_ns as f64 * jitter) as u64);
        let per_io = d.block_ns / eff;
        let start = media.max(d.dma_free);
        d.dma_free = start.after((per_io * n as f64) as u64);
        let bytes = d.block_bytes;
        self.vq[qi].cq.push(
            start.after(per_io as u64),
            per_io as u32,
            n,
            bytes,
            EntryKind::Cqe,
            // The tag says whose read it is.
            wl as u32,
            t.ns(),
        );
        let s = self.vq[qi].src;
        self.schedule_fire(s);
    }
}
