//! Clusters (`docs/lir.md` §2.14): the CTAs of a cluster run together, and the
//! instructions that reach a peer CTA.
//!
//! *Scheduling.* The machine holds one CTA's state (shared and local memory with
//! their shadows, registers, barriers, async state); the other CTAs of the
//! cluster are parked in [`CtaCtx`]s and swapped in by [`Machine::switch_to`].
//! Each CTA runs until none of its threads can; then the next one runs; when a
//! whole round makes no progress, the cluster barrier may complete, else the
//! kernel hangs (reported as for one CTA).
//!
//! *Cluster barrier.* `barrier.cluster.arrive` counts the thread's arrivals,
//! `barrier.cluster.wait` blocks until every thread of every CTA of the cluster
//! has arrived as often as it has; arriving twice without a wait, or waiting
//! without an arrive, is an error. A phase orders each thread's accesses before
//! its arrive before every thread's accesses after its wait, in every CTA of the
//! cluster (peers' writes into a CTA too), and nothing between a thread's arrive
//! and its wait (`ClusterThreads`). A `.relaxed` arrive releases nothing: its
//! phase orders only what the thread's previous arrive released (execution only),
//! and the mbarrier inits before the thread's last `fence.mbarrier_init`.
//!
//! *Remote arrives* must reach their target before it exits: each is settled by a
//! wait of the target's past a later phase of that barrier, or by a releasing
//! cluster arrive of the issuer's after it (`PeerArrive`); one left unsettled when
//! the cluster ends is an error.
//!
//! *Global memory.* In a cluster each CTA's clock ticks are its rank modulo the
//! cluster size (`Machine::tick`), so the stamp of a global shadow record names
//! the CTA whose thread made it (`Machine::foreign`): another CTA's access is
//! ordered only by a cluster barrier phase (memory.rs: `peer_ordered`), never by
//! this CTA's barriers, and thread ids of two CTAs never meet.
//!
//! *Peer copies.* `cp.async.bulk.shared::cluster.shared::cta` reads the source
//! when issued (async proxy: a generic write needs `fence.proxy.async` first)
//! and lands in the peer CTA like a TMA load (in flight until the peer's mbarrier
//! phase completes; its bytes complete that phase's transaction count). The
//! peer's barrier must have been initialised before a cluster barrier the issuer
//! passed. In the receiving CTA such a write (and a multicast load's from another CTA)
//! is checked against that CTA's earlier accesses by the cluster barrier, or by what the
//! issuing thread knew of that CTA through a chain of earlier exchanges (`AsyncState::peer`:
//! a copy carries its issuer's knowledge and its CTA's last CTA barrier, the phase it completes
//! releases them to the waiters; [`Machine::peer_write_ordered`]: the issuing thread's id names
//! a thread of another CTA); its landing is ordered before a reader there only through the phase of the
//! barrier it completes, as a TMA load's is (acquired per barrier, `asynch`: a wait on
//! the receiving CTA's other barriers does not acquire it). The issuing CTA must pass a cluster barrier after the copy completed
//! before it exits (the hardware reads its source until then, and a CTA's shared
//! memory is gone when it exits); a multicast TMA load lands in every CTA of its
//! mask at the same offset and completes each one's barrier.

use crate::asynch::{AsyncIns, CopyKind, Flight};
use crate::error::{SimError, SimErrorKind};
use crate::exec::{Machine, State};
use crate::family::{FamilyState, Flow};
use crate::memory::{Dir, Leaders, ShadowWords, WarpReads};
use crate::tma::Landing;
use tirx_ir::lir::Space;

/// A parked CTA's copy of one buffer (global buffers: empty, they are shared by the cluster).
#[derive(Default)]
struct ParkedBuf {
    data: Vec<u8>,
    shadow: Vec<ShadowWords>,
    init: Vec<u32>,
    /// The per-warpgroup read stamps of the shadow's several-leaders records.
    leaders: Leaders,
    /// The per-warp read stamps of its several-warps records.
    warps: WarpReads,
}

/// A parked CTA of the cluster.
pub(crate) struct CtaCtx {
    /// Per buffer: its shared or local memory in this CTA.
    mem: Vec<ParkedBuf>,
    regs: Vec<u64>,
    pcs: Vec<u32>,
    state: Vec<State>,
    cta: [u32; 3],
    cta_start: u32,
    cta_sync: u32,
    wsync: Vec<u32>,
    fam: FamilyState,
}

/// Per thread of a CTA: its cluster barrier arrivals and completed waits, and the tick of
/// each arrive of the last three phases (a thread that passed phase `k` orders the accesses
/// its CTA's threads made before their arrive of phase `k`; no thread is more than two
/// phases ahead of another's last wait: arriving for phase `k + 2` needs phase `k + 1`
/// complete, which needs every thread to have waited for phase `k`).
pub(crate) struct ClusterThreads {
    arrive: Vec<u32>,
    wait: Vec<u32>,
    /// Per thread and phase (mod 3): the instruction (pc) of its arrive and of its wait (the
    /// `.aligned` forms need a warp's lanes at one instruction).
    arrive_pc: Vec<[u32; 3]>,
    wait_pc: Vec<[u32; 3]>,
    arrive_tick: Vec<[u32; 3]>,
    /// Per thread and phase (mod 3): the tick before which its mbarrier inits are released by
    /// its arrive (a `.relaxed` arrive: those before its last `fence.mbarrier_init`).
    init_rel: Vec<[u32; 3]>,
    /// Per thread: the tick of its last `fence.mbarrier_init.release.cluster` (0: none).
    pub(crate) init_fence: Vec<u32>,
    /// Per phase (mod 3): the earliest arrive tick of this CTA's threads in it.
    min_arrive: [u32; 3],
}

impl ClusterThreads {
    pub(crate) fn new(n: usize) -> ClusterThreads {
        ClusterThreads {
            arrive: vec![0; n],
            wait: vec![0; n],
            arrive_pc: vec![[0; 3]; n],
            wait_pc: vec![[0; 3]; n],
            arrive_tick: vec![[0; 3]; n],
            init_rel: vec![[0; 3]; n],
            init_fence: vec![0; n],
            min_arrive: [0; 3],
        }
    }

    pub(crate) fn reset(&mut self) {
        self.arrive.fill(0);
        self.wait.fill(0);
        self.arrive_pc.fill([0; 3]);
        self.wait_pc.fill([0; 3]);
        self.arrive_tick.fill([0; 3]);
        self.init_rel.fill([0; 3]);
        self.init_fence.fill(0);
        self.min_arrive = [0; 3];
    }

    /// The ring slot of the last phase thread `t` passed (`None`: none yet).
    pub(crate) fn passed(&self, t: u32) -> Option<usize> {
        let k = self.wait[t as usize];
        (k > 0).then_some(k as usize % 3)
    }

    /// The tick before which thread `p`'s accesses are ordered before thread `t`'s next ones
    /// by the last cluster barrier phase `t` passed (`p`'s arrive in it), both of this CTA.
    pub(crate) fn arrived_before(&self, p: u32, t: u32) -> u32 {
        self.passed(t).map_or(0, |k| self.arrive_tick[p as usize][k])
    }

    /// The tick before which thread `p`'s mbarrier inits are ordered before thread `t`'s next
    /// accesses by the last cluster barrier phase `t` passed (a `.relaxed` arrive after
    /// `fence.mbarrier_init` releases them).
    pub(crate) fn inits_before(&self, p: u32, t: u32) -> u32 {
        self.passed(t).map_or(0, |k| self.init_rel[p as usize][k])
    }

    /// [`Self::arrived_before`] for every thread of the CTA at once (its earliest arrive).
    pub(crate) fn all_arrived_before(&self, t: u32) -> u32 {
        self.passed(t).map_or(0, |k| self.min_arrive[k])
    }
}

/// A dsmem copy issued in this cluster: who, where, and the cluster barrier it still needs.
#[derive(Clone, Debug)]
pub(crate) struct PeerCopy {
    pub rank: usize,
    pub t: u32,
    pub site: u32,
    pub peer: usize,
    /// The tick its bytes landed in the peer.
    pub landed: Option<u32>,
    /// A cluster barrier completed after it landed.
    pub settled: bool,
}

/// A remote mbarrier arrive not yet ordered before its target CTA's exit: by a wait of the
/// target's on a later phase of the barrier, or a releasing cluster barrier arrive of the issuer's.
#[derive(Clone, Debug)]
pub(crate) struct PeerArrive {
    pub rank: usize,
    pub t: u32,
    pub site: u32,
    /// The issuer's tick at the arrive.
    pub tick: u32,
    pub peer: usize,
    pub bar: u32,
    pub e: usize,
    /// The phase of the peer's barrier it counts toward.
    pub phase: u32,
}

impl<'a> Machine<'a> {
    /// A fresh parked CTA: zeroed memory of every shared and local buffer.
    pub(crate) fn fresh_ctx(&self) -> Result<CtaCtx, SimError> {
        use crate::memory::try_zeroed;
        let n = self.n;
        let mut mem = Vec::with_capacity(self.bufs.len());
        for b in &self.bufs {
            let what = || format!("buffer `{}` of a cluster's CTA", b.name);
            mem.push(match b.space {
                Space::Global => ParkedBuf::default(),
                Space::Shared => ParkedBuf {
                    data: try_zeroed(b.data.len(), &what)?,
                    shadow: try_zeroed(b.shadow.len(), &what)?,
                    ..ParkedBuf::default()
                },
                Space::Local => ParkedBuf {
                    data: try_zeroed(b.data.len(), &what)?,
                    init: try_zeroed(b.init.len(), &what)?,
                    ..ParkedBuf::default()
                },
            });
        }
        Ok(CtaCtx {
            mem,
            regs: try_zeroed(self.regs.len(), &|| "registers".to_string())?,
            pcs: vec![0; n],
            state: vec![State::Exited; n],
            cta: [0; 3],
            cta_start: 0,
            cta_sync: 0,
            wsync: vec![0; self.wsync.len()],
            fam: FamilyState::new(self.k, n),
        })
    }

    /// Exchanges the machine's CTA state with parked slot `r`.
    fn exchange(&mut self, r: usize) {
        let c = &mut self.ctxs[r];
        for (b, m) in self.bufs.iter_mut().zip(&mut c.mem) {
            if b.space != Space::Global {
                std::mem::swap(&mut b.data, &mut m.data);
                std::mem::swap(&mut b.shadow, &mut m.shadow);
                std::mem::swap(&mut b.init, &mut m.init);
                std::mem::swap(&mut b.leaders, &mut m.leaders);
                std::mem::swap(&mut b.warps, &mut m.warps);
            }
        }
        std::mem::swap(&mut self.regs, &mut c.regs);
        std::mem::swap(&mut self.pcs, &mut c.pcs);
        std::mem::swap(&mut self.state, &mut c.state);
        std::mem::swap(&mut self.cta, &mut c.cta);
        std::mem::swap(&mut self.cta_start, &mut c.cta_start);
        std::mem::swap(&mut self.cta_sync, &mut c.cta_sync);
        std::mem::swap(&mut self.wsync, &mut c.wsync);
        std::mem::swap(&mut self.fam, &mut c.fam);
    }

    /// Makes the CTA of rank `r` the running one (the slot of the running CTA holds a spare).
    pub(crate) fn switch_to(&mut self, r: usize) {
        if r == self.rank || self.ctxs.is_empty() {
            return;
        }
        let cur = self.rank;
        self.exchange(cur);
        self.exchange(r);
        self.rank = r;
    }

    /// CTAs per cluster.
    pub(crate) fn cluster_size(&self) -> usize {
        self.k.cluster_size().max(1) as usize
    }

    /// `barrier.cluster.arrive` by thread `t`; `relaxed` (`.relaxed`): it releases nothing new,
    /// the phase orders only what the thread's previous arrive did (transitively: a waiter past
    /// this phase is past that one).
    pub(crate) fn cluster_arrive(&mut self, t: u32, site: u32, relaxed: bool) -> Result<(), SimError> {
        let i = t as usize;
        if self.fam.cluster.arrive[i] > self.fam.cluster.wait[i] {
            let msg = format!("{} arrives at the cluster barrier twice without waiting in between", self.who(t));
            return Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg).help(
                "pair every `barrier.cluster.arrive` with a `barrier.cluster.wait` (or use `T.cuda.cluster_sync()`)",
            ));
        }
        self.cluster_lanes_together(t, site, false)?;
        self.fam.cluster.arrive[i] += 1;
        let a = self.fam.cluster.arrive[i] as usize;
        if relaxed {
            let c = &mut self.fam.cluster;
            let (before, init_before) =
                if a >= 2 { (c.arrive_tick[i][(a - 1) % 3], c.init_rel[i][(a - 1) % 3]) } else { (0, 0) };
            c.arrive_tick[i][a % 3] = before;
            c.init_rel[i][a % 3] = init_before.max(c.init_fence[i]);
            return Ok(());
        }
        // Its later accesses are stamped after the arrive: the barrier does not order them.
        let tick = self.tick()?;
        self.fam.cluster.arrive_tick[i][a % 3] = tick;
        self.fam.cluster.init_rel[i][a % 3] = tick;
        self.fam.asy.rel[i] = tick;
        Ok(())
    }

    /// The tick before which every access of every CTA of the cluster is ordered before
    /// thread `t`'s next ones by the last cluster barrier phase `t` passed (the earliest
    /// arrive in it; 0 before any).
    pub(crate) fn cluster_released(&self, t: u32) -> u32 {
        self.fam.cluster.passed(t).map_or(0, |k| self.cluster_min_arrive[k])
    }

    /// What [`ClusterThreads::all_arrived_before`] says of the CTA of rank `r` (another, parked
    /// CTA of the cluster) for the running CTA's thread `t`.
    pub(crate) fn peer_all_arrived_before(&self, r: usize, t: u32) -> u32 {
        self.peer_phase(r, t).map_or(0, |(c, k)| c.min_arrive[k])
    }

    /// What [`ClusterThreads::arrived_before`] says of thread `p` of the CTA of rank `r`
    /// (another, parked CTA of the cluster) for the running CTA's thread `t`.
    pub(crate) fn peer_arrived_before(&self, r: usize, p: u32, t: u32) -> u32 {
        self.peer_phase(r, t).map_or(0, |(c, k)| c.arrive_tick.get(p as usize).map_or(0, |a| a[k]))
    }

    /// The cluster barrier state of the parked CTA of rank `r` and the ring slot of the last
    /// phase the running CTA's thread `t` passed (`None`: none passed, or `r` is this CTA).
    fn peer_phase(&self, r: usize, t: u32) -> Option<(&ClusterThreads, usize)> {
        let k = self.fam.cluster.passed(t)?;
        self.ctxs.get(r).filter(|_| r != self.rank).map(|c| (&c.fam.cluster, k))
    }

    /// `barrier.cluster.wait` by thread `t`: passes once the phase it arrived at completed.
    pub(crate) fn cluster_wait(&mut self, t: u32, site: u32) -> Result<Flow, SimError> {
        let i = t as usize;
        if self.fam.cluster.arrive[i] != self.fam.cluster.wait[i] + 1 {
            let msg = format!("{} waits at the cluster barrier without arriving first", self.who(t));
            return Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg)
                .help("`barrier.cluster.wait` follows the thread's `barrier.cluster.arrive`"));
        }
        self.cluster_lanes_together(t, site, true)?;
        if self.cluster_phase >= self.fam.cluster.arrive[i] {
            self.fam.cluster.wait[i] += 1;
            return Ok(Flow::Next);
        }
        Ok(Flow::Block)
    }

    /// Thread `t`'s arrive (or wait) for its next cluster barrier phase: the instruction is
    /// `.aligned`, so every lane of its warp that reached that phase's arrive (wait) did so at
    /// this instruction (lanes apart under a lane-dependent condition hang the hardware).
    fn cluster_lanes_together(&mut self, t: u32, site: u32, wait: bool) -> Result<(), SimError> {
        let (i, pc) = (t as usize, self.pcs[t as usize]);
        let c = &mut self.fam.cluster;
        let (count, pcs) = if wait { (&c.wait, &mut c.wait_pc) } else { (&c.arrive, &mut c.arrive_pc) };
        let phase = count[i] + 1;
        let slot = phase as usize % 3;
        let warp = i / 32 * 32..(i / 32 * 32 + 32).min(count.len());
        let apart = warp.filter(|&l| l != i && count[l] == phase).find(|&l| pcs[l][slot] != pc);
        pcs[i][slot] = pc;
        let Some(l) = apart else { return Ok(()) };
        let what = if wait { "barrier.cluster.wait" } else { "barrier.cluster.arrive" };
        let msg = format!(
            "{} reaches `{what}` of the cluster barrier's phase {phase} at another instruction than lane {} of its warp did: the instruction is `.aligned`, the warp's lanes execute it together",
            self.who(t),
            l % 32
        );
        Err(SimError::new(SimErrorKind::BarrierDivergence, self.prog.sites[site as usize], msg).help(
            "arrive and wait where the whole warp is (not under a lane-dependent condition such as `if tid == 0`)",
        ))
    }

    /// Threads of the running CTA whose cluster barrier phase completed pass their wait.
    pub(crate) fn release_cluster_waits(&mut self) -> bool {
        let mut progressed = false;
        for t in 0..self.n {
            if self.state[t] == State::Waiting
                && self.fam.cluster.arrive[t] == self.fam.cluster.wait[t] + 1
                && self.cluster_phase >= self.fam.cluster.arrive[t]
                && self.at_cluster_wait(t)
            {
                self.fam.cluster.wait[t] += 1;
                self.state[t] = State::Runnable;
                self.pcs[t] += 1;
                progressed = true;
            }
        }
        progressed
    }

    fn at_cluster_wait(&self, t: usize) -> bool {
        matches!(self.prog.code[self.pcs[t] as usize].family(), Some(AsyncIns::ClusterWait { .. }))
    }

    /// Completes the cluster barrier when every thread of every CTA has arrived for
    /// the next phase; dsmem copies landed before it settle. It orders each thread's
    /// accesses before its arrive before every thread's accesses after its wait (an access
    /// between a thread's arrive and wait is ordered by neither: `ClusterThreads`).
    pub(crate) fn release_cluster_barrier(&mut self) -> Result<bool, SimError> {
        let next = self.cluster_phase + 1;
        let me = self.rank;
        let mut all = true;
        for r in 0..self.cluster_size() {
            self.switch_to(r);
            all &= self.fam.cluster.arrive.iter().all(|&a| a >= next);
        }
        if !all {
            self.switch_to(me);
            return Ok(false);
        }
        self.cluster_phase = next;
        let k = next as usize % 3;
        self.cluster_min_arrive[k] = u32::MAX;
        for r in 0..self.cluster_size() {
            self.switch_to(r);
            let c = &mut self.fam.cluster;
            c.min_arrive[k] = c.arrive_tick.iter().map(|a| a[k]).min().unwrap_or(0);
            self.cluster_min_arrive[k] = self.cluster_min_arrive[k].min(c.min_arrive[k]);
            // (a remote arrive of this CTA's before its thread's releasing arrive reaches its
            // target before the phase completes)
            let ticks = &c.arrive_tick;
            self.peer_arrives.retain(|a| a.rank != r || ticks.get(a.t as usize).is_none_or(|x| x[k] <= a.tick));
            self.fam.asy.cta_sync();
        }
        self.switch_to(me);
        for c in &mut self.peer_copies {
            c.settled |= c.landed.is_some();
        }
        Ok(true)
    }

    /// `cp.async.bulk.shared::cluster.shared::cta`: reads `n` elements of `src` from
    /// `s` now, lands them at `d` of `dst` in the CTA of rank `peer`, completing on its `bar`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn bulk_to_peer(
        &mut self,
        t: u32,
        site: u32,
        (dst, di): (u32, i64),
        (src, si): (u32, i64),
        bytes: u32,
        (bar, bi): (u32, i64),
        peer: i64,
    ) -> Result<(), SimError> {
        let size = self.cluster_size();
        let Some(peer) = usize::try_from(peer).ok().filter(|&p| p < size) else {
            let msg =
                format!("dsmem copy by {} to CTA rank {peer}, which is not in the cluster of {size} CTAs", self.who(t));
            return Err(SimError::new(SimErrorKind::OutOfBounds, self.prog.sites[site as usize], msg)
                .help("`remote_cta_id` is a rank of the cluster: 0 .. cluster size - 1"));
        };
        let esize = self.bufs[src as usize].esize;
        let n = bytes as usize / esize;
        let s = self.bounds(src, t, si, n, site, "dsmem copy source")?;
        self.aligned(src, t, s, 16, site, "dsmem copy source")?;
        let mut data = vec![0u8; n * esize];
        if self.opts.check_races {
            for e in s..s + n {
                self.proxy_check(src, e, t, site, crate::asynch::DSMEM_READER)?;
            }
        }
        // The dsmem copy reads its source through the async proxy.
        self.read_raw_via(src, t, s, n, Dir::ReadAsync, site, &mut data)?;
        let id = self.peer_copies.len();
        self.peer_copies.push(PeerCopy { rank: self.rank, t, site, peer, landed: None, settled: false });
        let (me, phase) = (self.rank, self.fam.cluster.passed(t));
        let known = self.peer_knowledge(t);
        self.switch_to(peer);
        let r = self.land_from_peer(t, site, (dst, di, n), data, (bar, bi), (id, &known), phase);
        self.switch_to(me);
        r
    }

    /// What a dsmem copy by thread `t` of the running CTA releases when it completes, per
    /// cluster rank: what `t` knows of the other CTAs, and of its own every access before its
    /// last CTA barrier (`cta_sync`: every thread's, so a barrier between the CTA's reads of a
    /// buffer and one thread's copy orders them all before it).
    pub(crate) fn peer_knowledge(&self, t: u32) -> Vec<u32> {
        let mut known = self.fam.asy.peer[t as usize].clone();
        if known.len() < self.cluster_size() {
            known.resize(self.cluster_size(), 0);
        }
        known[self.rank] = known[self.rank].max(self.cta_sync).max(self.fam.cluster.all_arrived_before(t));
        // (the last cluster barrier it passed orders every CTA's accesses before their arrives)
        let barrier = self.cluster_released(t);
        known.iter_mut().take(self.cluster_size()).for_each(|k| *k = (*k).max(barrier));
        known
    }

    /// Where a row of `AsyncState::peer` keeps what is known of thread `q` of the CTA of rank
    /// `r`: after the per-rank ticks (one per rank), one tick per thread of each rank.
    pub(crate) fn peer_thread_slot(&self, r: usize, q: u32) -> usize {
        self.cluster_size() + r * self.n + q as usize
    }

    /// The tick before which thread `q` of the running CTA accessed what a copy or arrive of
    /// another CTA is ordered after, by `known` (its issuer's row of `AsyncState::peer`): the last
    /// cluster barrier, what the issuer knew of this CTA, or of `q`.
    pub(crate) fn peer_known(&self, known: &[u32], q: u32) -> u32 {
        let cta = known.get(self.rank).copied().unwrap_or(0);
        cta.max(known.get(self.peer_thread_slot(self.rank, q)).copied().unwrap_or(0))
    }

    /// Where a row of `AsyncState::peer` keeps the newest landing known of the CTA of rank `r`
    /// completing on its barrier of slot `s` (after the threads' ticks).
    pub(crate) fn peer_landing_slot(&self, r: usize, s: u32) -> usize {
        self.cluster_size() * (1 + self.n) + r * self.barrier_slots + s as usize
    }

    /// Where a row of `AsyncState::peer` keeps what is known of thread `q` of the CTA of rank `r`
    /// through CTA-scope remote arrives: a tick before which its reads (not its writes) happen
    /// before the row's thread (after the landings).
    pub(crate) fn peer_read_slot(&self, r: usize, q: u32) -> usize {
        self.cluster_size() * (1 + self.n + self.barrier_slots) + r * self.n + q as usize
    }

    /// The tick before which thread `q` of the running CTA read what a copy of another CTA is
    /// ordered after, by `known`: what orders all its accesses (`peer_known`) or its reads alone.
    pub(crate) fn peer_known_reads(&self, known: &[u32], q: u32) -> u32 {
        self.peer_known(known, q).max(known.get(self.peer_read_slot(self.rank, q)).copied().unwrap_or(0))
    }

    /// `mbarrier.arrive.release.cluster.shared::cluster` by thread `t`: one arrival on `bar[idx]`
    /// of the CTA of rank `rank` (this CTA's: a local arrive). It releases, to the threads that
    /// acquire the phase there, what `t` knows of the cluster's CTAs (`peer_knowledge`) and, of
    /// this CTA, thread by thread what a local arrive of `t` releases — its own accesses so far,
    /// its warp's before its last `__syncwarp`, what it acquired through mbarrier waits and named
    /// barriers, everyone's before the last CTA barrier: what lets the peer's producer refill a
    /// stage that a multicast load writes here once this CTA's consumers freed it.
    /// `cta_scope` (`mbarrier.arrive.shared::cluster`, CUTLASS's: no fence) releases the same
    /// threads' reads only, and the landings `t` acquired (each complete before it is issued,
    /// their values held), into the row's read slots (`peer_read_slot`): a peer's later write is
    /// ordered after those reads, not after a write here.
    pub(crate) fn mbar_arrive_remote(
        &mut self,
        t: u32,
        site: u32,
        bar: u32,
        idx: i64,
        rank: i64,
        cta_scope: bool,
    ) -> Result<(), SimError> {
        let size = self.cluster_size();
        let Some(rank) = usize::try_from(rank).ok().filter(|&r| r < size) else {
            let msg = format!(
                "mbarrier.arrive by {} on CTA rank {rank}, which is not in the cluster of {size} CTAs",
                self.who(t)
            );
            return Err(SimError::new(SimErrorKind::OutOfBounds, self.prog.sites[site as usize], msg)
                .help("`cta_id=` is a rank of the cluster: 0 .. cluster size - 1"));
        };
        if rank == self.rank {
            return self.mbar_arrive(t, site, bar, idx, 0);
        }
        let what = "mbarrier.arrive (remote)";
        let e = self.bounds(bar, t, idx, 1, site, what)?;
        let tick = self.tick()?;
        // (CTA scope: nothing of what `t` learnt of other CTAs, only the barrier known to all)
        let mut known = if cta_scope { vec![0; self.rank + 1] } else { self.peer_knowledge(t) };
        let (w, warp_sync) = (t / 32, self.wsync[(t / 32) as usize]);
        let landings: Vec<(u32, u32)> =
            self.fam.asy.acquired_slots(t).map(|s| (s, self.fam.asy.acquired_landing(t, s))).collect();
        let mut raise = |i: usize, tick: u32| {
            if known.len() <= i {
                known.resize(i + 1, 0);
            }
            known[i] = known[i].max(tick);
        };
        for q in 0..self.n as u32 {
            let lane = if q / 32 == w { warp_sync } else { 0 };
            let by = self.fam.asy.acquired(t, q).max(self.named_synced(t, q)).max(self.cta_sync).max(lane);
            let by = by.max(self.fam.cluster.arrived_before(q, t));
            let slot = if cta_scope { self.peer_read_slot(self.rank, q) } else { self.peer_thread_slot(self.rank, q) };
            raise(slot, if q == t { tick } else { by });
        }
        // (the TMA landings it acquired: a stage's last load here, which a peer's refills follow)
        for (s, landed) in landings {
            raise(self.peer_landing_slot(self.rank, s), landed);
        }
        let (me, phase) = (self.rank, self.fam.cluster.passed(t));
        self.switch_to(rank);
        if let Some(b) = self.fam.asy.bars.get(&(bar, e)) {
            let phase = b.phase;
            self.peer_arrives.push(PeerArrive { rank: me, t, site, tick, peer: rank, bar, e, phase });
        }
        let r = self.arrive_from_peer(t, site, (bar, e), &known, phase, me);
        self.switch_to(me);
        r
    }

    /// In a peer CTA of the issuer (the running one): `bar[e]`'s init was released by its
    /// initialising thread's arrive at the last cluster barrier phase the issuer passed (ring
    /// slot `phase`; a `.relaxed` arrive releases the inits before a `fence.mbarrier_init`), so
    /// the issuer's copy or arrive is ordered after the init (the thread-level check would
    /// compare thread ids of different CTAs). The init is the barrier word's last write
    /// (arrive and wait read it).
    pub(crate) fn peer_barrier_ready(&self, bar: u32, e: usize, phase: Option<usize>) -> bool {
        let Some(b) = self.fam.asy.bars.get(&(bar, e)) else {
            return false;
        };
        let init_at = self.bufs[bar as usize].shadow.get(e).map_or(0, |w| w[0]);
        !self.opts.check_races || phase.is_some_and(|k| init_at < self.fam.cluster.init_rel[b.init_by as usize][k])
    }

    /// In the destination CTA: the copy's bytes attach to its barrier's phase.
    #[allow(clippy::too_many_arguments)]
    fn land_from_peer(
        &mut self,
        t: u32,
        site: u32,
        (dst, di, n): (u32, i64, usize),
        data: Vec<u8>,
        (bar, bi): (u32, i64),
        (id, known): (usize, &[u32]),
        phase: Option<usize>,
    ) -> Result<(), SimError> {
        let d = self.bounds(dst, t, di, n, site, "dsmem copy destination")?;
        self.aligned(dst, t, d, 16, site, "dsmem copy destination")?;
        let e = self.bounds(bar, t, bi, 1, site, "dsmem copy's mbarrier")?;
        if !self.peer_barrier_ready(bar, e, phase) {
            let msg = format!(
                "dsmem copy by thread {t} of CTA rank {} completes on `{}[{e}]` of CTA ({}, {}, {}), which is not initialised before a cluster barrier the copy follows",
                self.peer_copies[id].rank,
                self.bufs[bar as usize].name,
                self.cta[0],
                self.cta[1],
                self.cta[2],
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg).help(
                "initialise the barrier in every CTA, then `T.ptx.fence.mbarrier_init.release.cluster()` and `T.cuda.cluster_sync()`, before peers copy into it",
            ));
        }
        let elems: Vec<usize> = (d..d + n).collect();
        let from = self.peer_copies[id].rank;
        let foreign = (from != self.rank).then_some(from);
        self.attach_landing(t, site, dst, elems, data, (bar, e), (CopyKind::Dsmem, foreign), (Some(id), known))
    }

    /// Registers an asynchronous write of `elems` of `buf` completing on barrier `key` of
    /// the running CTA: checked against earlier accesses, in flight until the phase completes.
    /// `from`: the rank of the issuing CTA when it is not the running one (thread `t` is
    /// one of its threads): then a cluster barrier orders this CTA's earlier accesses before
    /// the write, or what the issuer knows of this CTA (`known`, its `AsyncState::peer` row: per
    /// rank, a chain of earlier exchanges; per thread, remote arrives;
    /// [`Machine::peer_write_ordered`]). `peer`: a dsmem copy's index.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attach_landing(
        &mut self,
        t: u32,
        site: u32,
        buf: u32,
        elems: Vec<usize>,
        data: Vec<u8>,
        key: (u32, usize),
        (kind, from): (CopyKind, Option<usize>),
        (peer, known): (Option<usize>, &[u32]),
    ) -> Result<(), SimError> {
        self.touch(key.0, t, key.1, Dir::Read, site)?;
        if self.opts.check_races {
            let what = match (kind, from) {
                (CopyKind::TmaLoad, Some(_)) => "a multicast TMA load",
                _ => "a dsmem copy",
            };
            for &d in &elems {
                if let Some(err) = self.inflight_conflict(buf, t, d, Dir::Write, site) {
                    return Err(err);
                }
                match from {
                    None => {
                        self.write_ordered(buf, t, d, site, false)?;
                        let what = if kind == CopyKind::TmaLoad { "the TMA load" } else { "the dsmem copy" };
                        self.proxy_war_check(buf, t, d, site, what)?;
                    }
                    Some(rank) => {
                        self.peer_write_ordered(buf, (rank, t), d, site, what, known)?;
                        // A multicast refill, as this CTA's own TMA loads: each generic reader's
                        // fence.proxy.async ordered before it (through what its issuer knew; a
                        // CTA-scope arrive after the fence releases it with the reads). A
                        // dsmem copy's readers' fences are not checked: the chained exchanges
                        // order reads through CTA barriers only (`peer_write_ordered`).
                        if kind == CopyKind::TmaLoad {
                            let copy = format!("{what} issued by thread {t} of CTA rank {rank}");
                            self.proxy_war_check_by(buf, d, site, &copy, &|q, f| f < self.peer_known_reads(known, q))?;
                        }
                    }
                }
                self.fam.asy.inflight.insert((buf, d), Flight { t, site, kind });
            }
        }
        let bytes = data.len() as u64;
        let landing = Landing { site, issuer: t, buf, elems, data, bytes, peer, known: known.to_vec() };
        if let Some(b) = self.fam.asy.bars.get_mut(&key) {
            b.tx -= bytes as i64;
            b.copies.push(landing);
        }
        self.tx_in_range(t, site, key)?;
        self.complete_if_done(key)
    }

    /// After the cluster ran: every remote mbarrier arrive was ordered before its target CTA's
    /// exit (the hardware delivers it some time after it is issued; a CTA's shared memory is gone,
    /// or another CTA's, once it exits).
    pub(crate) fn peer_arrives_settled(&self) -> Option<SimError> {
        let a = self.peer_arrives.first()?;
        let msg = format!(
            "thread {} of CTA rank {} arrives on `{}[{}]` of CTA rank {} (remote), and neither does that CTA wait for the phase it counts toward nor does a releasing cluster barrier follow the arrive: the target CTA may exit before the arrive reaches its shared memory",
            a.t, a.rank, self.bufs[a.bar as usize].name, a.e, a.peer
        );
        Some(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[a.site as usize], msg).help(
            "have the target CTA wait for the barrier's phase before it exits (a producer's tail: each stage's release waited for once more), or end the kernel with `T.cuda.cluster_sync()`",
        ))
    }

    /// After the cluster ran: every dsmem copy's issuing CTA passed a cluster barrier after it completed.
    pub(crate) fn peer_copies_settled(&self) -> Option<SimError> {
        let c = self.peer_copies.iter().find(|c| !c.settled)?;
        let msg = format!(
            "thread {} of CTA rank {} copies into CTA rank {} (dsmem), and the cluster passes no cluster barrier after the copy completed: the issuing CTA may exit while the hardware still reads its source (and a CTA may exit while a peer still accesses its shared memory)",
            c.t, c.rank, c.peer
        );
        Some(SimError::new(SimErrorKind::AsyncCopy, self.prog.sites[c.site as usize], msg).help(
            "end the kernel with `T.cuda.cluster_sync()` in every CTA, after the peer waited for the copy's mbarrier phase",
        ))
    }
}
