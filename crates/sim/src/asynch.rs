//! Simulator of the **asynchronous** family: `cp.async` with commit / wait
//! groups, and mbarriers with real phases.
//!
//! *cp.async* reads its source when issued (bounds, alignment, race shadow as a
//! read by the issuing thread) and holds the bytes; the destination is written —
//! and stamped in the race shadow, as the issuing thread's write — only when
//! `cp.async.wait_group` completes the group that holds it, so nothing can see
//! the data earlier. `commit_group` closes the thread's open group (an empty one
//! too); `wait_group n` completes all but the newest `n` committed groups. While
//! a copy is in flight, any access to its destination is a race (with race
//! checking on). A thread that exits with copies not committed or not waited
//! for is an error.
//!
//! *mbarriers* live beside memory, keyed by (buffer, element), fresh for each
//! CTA. `init` sets the expected arrival count (phase 0); each arrive counts one
//! down, `expect_tx` adds pending transaction bytes (TMA loads, multicast TMA
//! loads and dsmem copies complete them); when both reach zero the phase completes
//! and the next begins with the full count. A wait on parity `p` returns once
//! the current phase's parity differs from `p` (the phase of parity `p` has
//! completed, as `try_wait.parity` does), else blocks the thread until an arrive
//! completes it; a wait that can never complete is a deadlock, reported with who
//! waits where. Init is a write of the barrier word in the race shadow, arrive and
//! wait are reads, so using a barrier unordered with its init is a race.
//!
//! *Ordering*: an arrive releases and a completed wait acquires. Each arrive gets
//! a new clock tick that stamps the arriving thread's later accesses; a barrier
//! remembers, per thread, the newest arrive tick of its completed phases; a
//! thread whose wait completes acquires those ticks (`acq[t][p]`), and an earlier
//! access by `p` stamped before that tick is ordered before `t`'s (`memory`).
//!
//! TMA landings (TMA loads, multicast loads, dsmem copies) are acquired *per mbarrier*:
//! each barrier initialised in the CTA gets a slot (its index in `slots`, in init
//! order); the copies completing on a phase land when it completes, stamped with one
//! new tick and the barrier's slot (`memory::LANDED`); `acq_tma[t][s]` is the newest
//! landing tick of slot `s` that `t` acquired, and a landing is ordered before `t`'s
//! access iff its tick is at most that. A wait on a barrier acquires its completed
//! phases' landing ticks for its own slot (phases complete in order, so that covers
//! every earlier phase), plus what the phases' arrivers had acquired of any slot
//! (transitivity); never another barrier's landings, even of the same issuing thread
//! or a peer CTA's thread of the same id. A CTA barrier, `__syncwarp` or named
//! barrier passes what any participant acquired (of arrive ticks and of landings) to
//! all of them, and a named barrier's `bar.arrive` releases what the arriving warp had
//! acquired to the threads that wait there ([`Acquired`], `barrier`).
//!
//! *Proxies*: a thread's shared writes go through the generic proxy; wgmma reads,
//! TMA stores and bulk copies read shared memory through the async proxy. A
//! generic-proxy write becomes visible to the async proxy after a
//! `fence.proxy.async` of the writing thread ordered before the reader
//! ([`Machine::proxy_check`]); TMA landings are async-proxy writes and need none.

use crate::compile::{Compile, Compiler, Reg};
use crate::error::{ranges, SimError, SimErrorKind};
use crate::exec::{Machine, State};
use crate::family::{FamilyIns, Flow};
use crate::memory::Dir;
use std::collections::{HashMap, VecDeque};
use tirx_ir::lir::{AsyncOp, LExpr, Mbar, Space, MBAR_MAX_COUNT};
use tirx_ir::DType;

#[derive(Clone, Debug)]
pub(crate) enum AsyncIns {
    CpAsync {
        site: u32,
        dst: u32,
        dst_idx: Reg,
        src: u32,
        src_idx: Reg,
        bytes: u32,
        src_bytes: Option<Reg>,
    },
    Commit,
    WaitGroup(u32),
    MbarInit {
        site: u32,
        bar: u32,
        idx: Reg,
        count: Reg,
    },
    /// `tx`: the expect_tx byte count, if any.
    MbarArrive {
        site: u32,
        bar: u32,
        idx: Reg,
        tx: Option<Reg>,
    },
    /// An arrival on the barrier at the same offset in the cluster's CTA of rank `rank` (`cluster`),
    /// releasing at cluster scope, or (`cta_scope`) the reads before it only.
    MbarArriveRemote {
        site: u32,
        bar: u32,
        idx: Reg,
        rank: Reg,
        cta_scope: bool,
    },
    MbarWait {
        site: u32,
        bar: u32,
        idx: Reg,
        parity: Reg,
    },
    /// `fence.proxy.async.shared::cta`: the thread's earlier shared writes become visible
    /// to the async proxy (wgmma reads, TMA stores, bulk copies) ordered after it.
    ProxyFence,
    /// `fence.mbarrier_init.release.cluster`: the thread's earlier mbarrier inits released to
    /// the cluster at its next arrive, `.relaxed` or not (in the CTA the barrier after orders them).
    Fence(&'static str),
    /// A TMA tensor load or store (`tma`).
    Tma(crate::tma::TmaIns),
    /// `cp.async.bulk.commit_group`.
    BulkCommit,
    /// `cp.async.bulk.wait_group[.read] n`.
    BulkWait {
        n: u32,
        read: bool,
    },
    /// `barrier.cluster.arrive[.relaxed]` / `barrier.cluster.wait` (`cluster`).
    ClusterArrive {
        site: u32,
        relaxed: bool,
    },
    ClusterWait {
        site: u32,
    },
    /// A grid group barrier on `word[idx]` of `size` CTAs (`grid_group`).
    GridGroupSync {
        site: u32,
        word: u32,
        idx: Reg,
        size: Reg,
    },
    /// `cp.async.bulk.shared::cluster.shared::cta` into the CTA of rank `rank` (`cluster`).
    BulkToPeer {
        site: u32,
        dst: u32,
        dst_idx: Reg,
        src: u32,
        src_idx: Reg,
        bytes: u32,
        bar: u32,
        bar_idx: Reg,
        rank: Reg,
    },
}

impl AsyncIns {
    /// The PTX name.
    fn ptx(&self) -> &'static str {
        match self {
            AsyncIns::CpAsync { .. } => "cp.async",
            AsyncIns::Commit => "cp.async.commit_group",
            AsyncIns::WaitGroup(_) => "cp.async.wait_group",
            AsyncIns::MbarInit { .. } => "mbarrier.init",
            AsyncIns::MbarArrive { tx: None, .. } => "mbarrier.arrive",
            AsyncIns::MbarArrive { tx: Some(_), .. } => "mbarrier.arrive.expect_tx",
            AsyncIns::MbarArriveRemote { cta_scope: false, .. } => "mbarrier.arrive.release.cluster.shared::cluster",
            AsyncIns::MbarArriveRemote { cta_scope: true, .. } => "mbarrier.arrive.shared::cluster",
            AsyncIns::MbarWait { .. } => "mbarrier.try_wait.parity",
            AsyncIns::ProxyFence => "fence.proxy.async.shared::cta",
            AsyncIns::Fence(name) => name,
            AsyncIns::Tma(t) => t.name(),
            AsyncIns::BulkCommit => "cp.async.bulk.commit_group",
            AsyncIns::BulkWait { read: true, .. } => "cp.async.bulk.wait_group.read",
            AsyncIns::BulkWait { read: false, .. } => "cp.async.bulk.wait_group",
            AsyncIns::ClusterArrive { .. } => "barrier.cluster.arrive",
            AsyncIns::ClusterWait { .. } => "barrier.cluster.wait",
            AsyncIns::BulkToPeer { .. } => "cp.async.bulk.shared::cluster.shared::cta",
            AsyncIns::GridGroupSync { .. } => "grid_group_sync",
        }
    }
}

/// Per thread: each thread issues, waits and arrives on its own.
impl FamilyIns for AsyncIns {
    fn name(&self) -> String {
        format!("`{}`", self.ptx())
    }

    /// The site of the instructions that can fail or block.
    fn site(&self) -> Option<u32> {
        match self {
            AsyncIns::CpAsync { site, .. }
            | AsyncIns::MbarInit { site, .. }
            | AsyncIns::MbarArrive { site, .. }
            | AsyncIns::MbarArriveRemote { site, .. }
            | AsyncIns::MbarWait { site, .. }
            | AsyncIns::ClusterArrive { site, .. }
            | AsyncIns::ClusterWait { site }
            | AsyncIns::GridGroupSync { site, .. }
            | AsyncIns::BulkToPeer { site, .. } => Some(*site),
            AsyncIns::Tma(t) => Some(t.site),
            AsyncIns::Commit
            | AsyncIns::WaitGroup(_)
            | AsyncIns::Fence(_)
            | AsyncIns::ProxyFence
            | AsyncIns::BulkCommit
            | AsyncIns::BulkWait { .. } => None,
        }
    }

    fn step(&self, m: &mut Machine<'_>, t: u32, base: usize) -> Result<Flow, SimError> {
        m.asynch(t, base, self)
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        match self {
            AsyncIns::CpAsync { dst_idx, src_idx, src_bytes, .. } => {
                f(dst_idx);
                f(src_idx);
                src_bytes.iter_mut().for_each(f);
            }
            AsyncIns::MbarInit { idx, count: r, .. } | AsyncIns::MbarWait { idx, parity: r, .. } => {
                f(idx);
                f(r)
            }
            AsyncIns::MbarArrive { idx, tx, .. } => {
                f(idx);
                tx.iter_mut().for_each(f)
            }
            AsyncIns::MbarArriveRemote { idx, rank, .. } => {
                f(idx);
                f(rank)
            }
            AsyncIns::Tma(t) => t.for_each_reg(f),
            AsyncIns::BulkToPeer { dst_idx, src_idx, bar_idx, rank, .. } => {
                f(dst_idx);
                f(src_idx);
                f(bar_idx);
                f(rank)
            }
            AsyncIns::ClusterArrive { .. } | AsyncIns::ClusterWait { .. } => {}
            AsyncIns::GridGroupSync { idx, size, .. } => {
                f(idx);
                f(size)
            }
            AsyncIns::Commit
            | AsyncIns::WaitGroup(_)
            | AsyncIns::Fence(_)
            | AsyncIns::ProxyFence
            | AsyncIns::BulkCommit
            | AsyncIns::BulkWait { .. } => {}
        }
    }
}

/// The kind of an asynchronous copy, for the reports of accesses it conflicts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyKind {
    CpAsync,
    TmaLoad,
    TmaStore,
    /// A TMA store that adds into global memory.
    TmaReduce,
    /// A dsmem copy from a peer CTA (`cluster`).
    Dsmem,
}

impl CopyKind {
    fn name(self) -> &'static str {
        match self {
            CopyKind::CpAsync => "cp.async",
            CopyKind::TmaLoad => "TMA load",
            CopyKind::TmaStore => "TMA store",
            CopyKind::TmaReduce => "TMA reduce-add",
            CopyKind::Dsmem => "dsmem copy",
        }
    }

    /// What completes it.
    fn completion(self) -> &'static str {
        match self {
            CopyKind::CpAsync => "cp.async.wait_group",
            CopyKind::TmaLoad | CopyKind::Dsmem => "the completion of its mbarrier phase",
            CopyKind::TmaStore | CopyKind::TmaReduce => "cp.async.bulk.wait_group (`.read` for its source)",
        }
    }
}

/// A copy in flight at an element: the issuing thread, its site, its kind.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Flight {
    pub t: u32,
    pub site: u32,
    pub kind: CopyKind,
}

/// A copy in flight: the bytes read at issue, where they land, and the source
/// elements it still reads (as far as the program can tell) until it completes.
#[derive(Clone, Debug)]
struct Pending {
    site: u32,
    dst: u32,
    elem: usize,
    elems: usize,
    data: [u8; 16],
    src: u32,
    src_elem: usize,
    src_elems: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct Barrier {
    pub(crate) count: u32,
    /// Arrivals still expected in the current phase.
    pub(crate) pending: u32,
    /// Transaction bytes still expected in the current phase.
    pub(crate) tx: i64,
    /// The current phase (completed phases so far).
    pub(crate) phase: u32,
    /// What the current phase's arrivals release, per thread: the arrive ticks,
    /// joined with what each arriving thread had acquired (so ordering is transitive).
    arriving: Vec<u32>,
    /// The same for the completed phases: what a waiter acquires.
    released: Vec<u32>,
    /// TMA loads completing on the current phase: they land when it completes.
    pub(crate) copies: Vec<crate::tma::Landing>,
    /// The barrier's slot in [`AsyncState`]'s `slots`: what its landings are stamped with.
    pub(crate) slot: u32,
    /// The thread that initialised it (whose cluster arrive releases the init to peers).
    pub(crate) init_by: u32,
    /// What the current phase's arrivals and landings release of TMA landings, per
    /// barrier slot (the landing ticks; joined like `arriving`; rows grow as slots
    /// appear), and the completed phases'.
    arriving_tma: Vec<u32>,
    released_tma: Vec<u32>,
    /// What the current phase's arrivals and dsmem landings release of the cluster's other
    /// CTAs, per rank (`AsyncState::peer`'s rows, joined like `arriving`), and the completed
    /// phases'.
    arriving_peer: Vec<u32>,
    released_peer: Vec<u32>,
}

/// What some threads acquired through mbarrier waits (and barriers since), joined over
/// them: rows of [`AsyncState`]'s `acq` (per thread) and `acq_tma` (per barrier slot).
#[derive(Clone, Debug, Default)]
pub(crate) struct Acquired {
    acq: Vec<u32>,
    acq_tma: Vec<u32>,
}

impl Acquired {
    /// Adds what `other` holds (an empty row, as in `Acquired::default()`, grows to its length).
    pub(crate) fn join(&mut self, other: &Acquired) {
        join_grow(&mut self.acq, &other.acq);
        join_grow(&mut self.acq_tma, &other.acq_tma);
    }
}

/// The per-CTA state of the family.
pub(crate) struct AsyncState {
    /// Per thread: copies issued since its last commit.
    open: Vec<Vec<Pending>>,
    /// Per thread: committed groups, oldest first.
    groups: Vec<VecDeque<Vec<Pending>>>,
    /// Destination elements of copies in flight: (buffer, element) -> who issued which copy.
    pub inflight: HashMap<(u32, usize), Flight>,
    /// Source elements of copies in flight: (buffer, element) -> (thread, site, copies
    /// reading it). The hardware may read a source any time before the copy completes,
    /// so writing one meanwhile is a race.
    pub inflight_src: HashMap<(u32, usize), (Flight, u32)>,
    pub(crate) bars: HashMap<(u32, usize), Barrier>,
    /// The stamps of the mbarrier inits' writes: what `fence.mbarrier_init` releases.
    pub(crate) init_stamps: std::collections::HashSet<u32>,
    /// Per thread: the tick of its last arrive (0: none in this CTA).
    pub rel: Vec<u32>,
    /// `acq[t * n + p]`: the newest arrive tick of `p` that `t` acquired; empty
    /// unless the kernel uses mbarriers.
    acq: Vec<u32>,
    /// `acq_tma[t][s]`: the newest landing tick of a copy completing on the barrier of
    /// slot `s` that `t` acquired (through mbarrier waits, then barriers; a row is as
    /// long as the slots it has seen); empty without TMA loads or dsmem copies.
    acq_tma: Vec<Vec<u32>>,
    /// `peer[t][r]`: a tick of the cluster's CTA of rank `r` such that its accesses stamped
    /// before it happen before thread `t`'s next ones: learnt through dsmem copies and multicast
    /// loads (a copy carries its issuer's knowledge, and its own CTA's last CTA barrier), the
    /// mbarrier phases they complete, and barriers since. After the ranks' ticks, per thread `q`
    /// of rank `r` (`Machine::peer_thread_slot`) the same for that thread's accesses alone, and
    /// per barrier slot of rank `r` (`Machine::peer_landing_slot`) the newest landing there
    /// known: what a remote arrive releases (`Machine::mbar_arrive_remote`). Lets a peer's copy
    /// into this CTA be ordered after this CTA's accesses by a chain of such exchanges, not only
    /// by a cluster barrier (`Machine::peer_write_ordered`). Rows grow as entries appear.
    pub(crate) peer: Vec<Vec<u32>>,
    /// Per slot: the barrier `(buffer, element)` it numbers, in the order of first init.
    pub(crate) slots: Vec<(u32, usize)>,
    /// Per thread: the ticks of its `fence.proxy.async`, ascending.
    proxy: Vec<Vec<u32>>,
    /// Per thread: bulk stores issued since its last `cp.async.bulk.commit_group`, and
    /// its committed bulk groups, oldest first (`tma`).
    pub(crate) bulk_open: Vec<Vec<crate::tma::BulkStore>>,
    pub(crate) bulk_groups: Vec<VecDeque<crate::tma::BulkGroup>>,
    n: usize,
}

impl AsyncState {
    pub(crate) fn new(n: usize, mbarriers: bool, tma_loads: bool) -> AsyncState {
        AsyncState {
            open: vec![vec![]; n],
            groups: vec![VecDeque::new(); n],
            inflight: HashMap::new(),
            inflight_src: HashMap::new(),
            bars: HashMap::new(),
            init_stamps: Default::default(),
            rel: vec![0; n],
            acq: if mbarriers { vec![0; n * n] } else { vec![] },
            acq_tma: if tma_loads { vec![vec![]; n] } else { vec![] },
            peer: vec![vec![]; n],
            slots: vec![],
            proxy: vec![vec![]; n],
            bulk_open: vec![vec![]; n],
            bulk_groups: vec![VecDeque::new(); n],
            n,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.open.iter_mut().for_each(Vec::clear);
        self.groups.iter_mut().for_each(VecDeque::clear);
        self.inflight.clear();
        self.inflight_src.clear();
        self.bars.clear();
        self.init_stamps.clear();
        self.rel.fill(0);
        self.acq.fill(0);
        self.acq_tma.iter_mut().for_each(Vec::clear);
        self.peer.iter_mut().for_each(Vec::clear);
        self.slots.clear();
        self.proxy.iter_mut().for_each(Vec::clear);
        self.bulk_open.iter_mut().for_each(Vec::clear);
        self.bulk_groups.iter_mut().for_each(VecDeque::clear);
    }

    /// The newest landing tick of a copy completing on the barrier of slot `s` that `t`
    /// acquired (0: none).
    #[inline]
    pub(crate) fn acquired_landing(&self, t: u32, s: u32) -> u32 {
        self.acq_tma.get(t as usize).and_then(|row| row.get(s as usize)).copied().unwrap_or(0)
    }

    /// The barrier slots of which `t` acquired a landing, for reports.
    pub(crate) fn acquired_slots(&self, t: u32) -> impl Iterator<Item = u32> + '_ {
        let row = self.acq_tma.get(t as usize).map_or(&[][..], Vec::as_slice);
        (0..row.len() as u32).filter(move |&s| row[s as usize] != 0)
    }

    /// A CTA barrier: every thread now has what any of them acquired of TMA landings and of
    /// the cluster's other CTAs.
    pub(crate) fn cta_sync(&mut self) {
        self.sync_landings(0..self.n, &[]);
        self.sync_peers(0..self.n);
    }

    /// Every thread of `ts` now has what any of them knows of the cluster's other CTAs.
    fn sync_peers(&mut self, ts: impl Iterator<Item = usize> + Clone) {
        let mut joined = vec![];
        for t in ts.clone() {
            join_grow(&mut joined, &self.peer[t]);
        }
        if joined.is_empty() {
            return;
        }
        for t in ts {
            let row = &mut self.peer[t];
            row.clear();
            row.extend_from_slice(&joined);
        }
    }

    /// Every thread of `ts` now has what any of them acquired of TMA landings, and `released`.
    fn sync_landings(&mut self, ts: impl Iterator<Item = usize> + Clone, released: &[u32]) {
        if self.acq_tma.is_empty() {
            return;
        }
        let mut joined = released.to_vec();
        for t in ts.clone() {
            join_grow(&mut joined, &self.acq_tma[t]);
        }
        for t in ts {
            let row = &mut self.acq_tma[t];
            row.clear();
            row.extend_from_slice(&joined);
        }
    }

    /// `__syncwarp` over `lanes`: each lane now has what any of them acquired.
    pub(crate) fn warp_sync(&mut self, lanes: std::ops::Range<usize>) {
        self.sync_threads(lanes, None);
    }

    /// What the threads `ts` have acquired so far, joined: what a `bar.arrive` of
    /// theirs releases to the threads that wait at the barrier (`barrier`).
    pub(crate) fn acquired_by(&self, ts: impl Iterator<Item = usize> + Clone) -> Acquired {
        let n = self.n;
        let mut acq = if self.acq.is_empty() { vec![] } else { vec![0; n] };
        let mut acq_tma = vec![];
        for t in ts {
            if !acq.is_empty() {
                join(&mut acq, &self.acq[t * n..(t + 1) * n]);
            }
            if let Some(row) = self.acq_tma.get(t) {
                join_grow(&mut acq_tma, row);
            }
        }
        Acquired { acq, acq_tma }
    }

    /// A barrier over the threads `ts` (`__syncwarp`, a named barrier): each of
    /// them now has what any of them acquired, and what `arrived` releases (the
    /// threads that arrived at a named barrier without waiting, as they arrived).
    pub(crate) fn sync_threads(&mut self, ts: impl Iterator<Item = usize> + Clone, arrived: Option<&Acquired>) {
        let n = self.n;
        let none = Acquired::default();
        let arrived = arrived.unwrap_or(&none);
        if !self.acq.is_empty() {
            let mut joined = vec![0; n];
            join(&mut joined, &arrived.acq);
            for t in ts.clone() {
                join(&mut joined, &self.acq[t * n..(t + 1) * n]);
            }
            for t in ts.clone() {
                self.acq[t * n..(t + 1) * n].copy_from_slice(&joined);
            }
        }
        self.sync_peers(ts.clone());
        self.sync_landings(ts, &arrived.acq_tma);
    }

    /// The ticks of thread `t`'s `fence.proxy.async`, ascending.
    pub(crate) fn proxy_fences(&self, t: u32) -> &[u32] {
        &self.proxy[t as usize]
    }

    /// Whether the kernel uses mbarriers (they then order accesses too).
    pub(crate) fn uses_mbarriers(&self) -> bool {
        !self.acq.is_empty()
    }

    /// The newest arrive tick of `p` that `t` acquired through mbarrier waits (0: none).
    #[inline]
    pub(crate) fn acquired(&self, t: u32, p: u32) -> u32 {
        self.acq.get(t as usize * self.n + p as usize).copied().unwrap_or(0)
    }

    /// The oldest tick `t` acquired from every thread of `ps` other than itself.
    pub(crate) fn acquired_from_all(&self, t: u32, ps: std::ops::Range<u32>) -> u32 {
        if self.acq.is_empty() {
            return 0;
        }
        ps.filter(|&p| p != t).map(|p| self.acquired(t, p)).min().unwrap_or(0)
    }
}

impl Compile for AsyncOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        c.asynch(self)
    }
}

impl Compiler<'_> {
    fn asynch(&mut self, a: &AsyncOp) -> Result<(), SimError> {
        let ins = match a {
            // The L2 prefetch size is a performance hint with no effect on the result.
            AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes, prefetch: _ } => {
                let (d, s) = (self.buf(*dst)?, self.buf(*src)?);
                let (db, sb) = (&self.k.bufs[d as usize], &self.k.bufs[s as usize]);
                if db.space != Space::Shared
                    || sb.space != Space::Global
                    || db.dtype != sb.dtype
                    || ![4, 8, 16].contains(bytes)
                {
                    return Err(self.invalid(format!("cp.async of {bytes} bytes `{}` <- `{}`", db.name, sb.name)));
                }
                let dst_idx = self.index(dst_index)?;
                let src_idx = self.index(src_index)?;
                let src_bytes = src_bytes.as_ref().map(|e| self.expr_as(e, DType::I32)).transpose()?;
                AsyncIns::CpAsync { site: self.site(), dst: d, dst_idx, src: s, src_idx, bytes: *bytes, src_bytes }
            }
            AsyncOp::CommitGroup => AsyncIns::Commit,
            AsyncOp::WaitGroup(n) => AsyncIns::WaitGroup(*n),
            AsyncOp::MbarInit { bar, count } => {
                let (b, idx, count) = self.mbar(bar, count)?;
                AsyncIns::MbarInit { site: self.site(), bar: b, idx, count }
            }
            AsyncOp::MbarArrive { bar, cta: None, .. } => {
                let (b, idx) = (self.mbar_buf(bar)?, self.index(&bar.index)?);
                AsyncIns::MbarArrive { site: self.site(), bar: b, idx, tx: None }
            }
            AsyncOp::MbarArrive { bar, cta: Some(rank), cta_scope } => {
                let (b, idx, rank) = self.mbar(bar, rank)?;
                AsyncIns::MbarArriveRemote { site: self.site(), bar: b, idx, rank, cta_scope: *cta_scope }
            }
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                let (b, idx, tx) = self.mbar(bar, bytes)?;
                AsyncIns::MbarArrive { site: self.site(), bar: b, idx, tx: Some(tx) }
            }
            AsyncOp::MbarWait { bar, parity } => {
                let (b, idx, parity) = self.mbar(bar, parity)?;
                AsyncIns::MbarWait { site: self.site(), bar: b, idx, parity }
            }
            AsyncOp::FenceMbarrierInit => AsyncIns::Fence(a.name()),
            AsyncOp::FenceProxyAsync => AsyncIns::ProxyFence,
            AsyncOp::TmaLoad(c) => AsyncIns::Tma(self.tma(c, true)?),
            AsyncOp::TmaStore(c) => AsyncIns::Tma(self.tma(c, false)?),
            AsyncOp::BulkCommit => AsyncIns::BulkCommit,
            AsyncOp::BulkWait { n, read } => AsyncIns::BulkWait { n: *n, read: *read },
            AsyncOp::ClusterBarrier { wait: false, relaxed } => {
                AsyncIns::ClusterArrive { site: self.site(), relaxed: *relaxed }
            }
            AsyncOp::ClusterBarrier { wait: true, .. } => AsyncIns::ClusterWait { site: self.site() },
            AsyncOp::GridGroupSync { word, word_index, size } => {
                let w = self.buf(*word)?;
                let wb = &self.k.bufs[w as usize];
                if wb.space != Space::Global || wb.dtype.bytes() != 4 {
                    return Err(self.invalid(format!("grid group barrier word `{}`", wb.name)));
                }
                AsyncIns::GridGroupSync {
                    site: self.site(),
                    word: w,
                    idx: self.index(word_index)?,
                    size: self.index(size)?,
                }
            }
            AsyncOp::BulkToPeer { dst, dst_index, src, src_index, bytes, bar, rank } => {
                let (d, s) = (self.buf(*dst)?, self.buf(*src)?);
                let (db, sb) = (&self.k.bufs[d as usize], &self.k.bufs[s as usize]);
                if db.space != Space::Shared || sb.space != Space::Shared || db.dtype != sb.dtype {
                    return Err(self.invalid(format!("dsmem copy `{}` <- `{}`", db.name, sb.name)));
                }
                let dst_idx = self.index(dst_index)?;
                let src_idx = self.index(src_index)?;
                let (b, bar_idx, rank) = self.mbar(bar, rank)?;
                AsyncIns::BulkToPeer {
                    site: self.site(),
                    dst: d,
                    dst_idx,
                    src: s,
                    src_idx,
                    bytes: *bytes,
                    bar: b,
                    bar_idx,
                    rank,
                }
            }
        };
        self.emit_family(ins);
        Ok(())
    }

    /// The barrier's buffer, index register and an int32 operand register.
    pub(crate) fn mbar(&mut self, bar: &Mbar, operand: &LExpr) -> Result<(u32, Reg, Reg), SimError> {
        let b = self.mbar_buf(bar)?;
        let idx = self.index(&bar.index)?;
        Ok((b, idx, self.expr_as(operand, DType::I32)?))
    }

    pub(crate) fn mbar_buf(&self, bar: &Mbar) -> Result<u32, SimError> {
        let b = self.buf(bar.buf)?;
        let lb = &self.k.bufs[b as usize];
        if lb.space != Space::Shared || !matches!(lb.dtype, DType::I64 | DType::U64) {
            return Err(self.invalid(format!("mbarrier in `{}`, which is not a shared 64-bit integer buffer", lb.name)));
        }
        Ok(b)
    }
}

/// An async-proxy reader of shared memory, for the messages of [`Machine::proxy_check`].
pub(crate) struct ProxyReader {
    /// What reads, as the message's subject.
    pub what: &'static str,
    pub kind: SimErrorKind,
    pub help: &'static str,
}

pub(crate) const WGMMA_READER: ProxyReader = ProxyReader {
    what: "wgmma.mma_async",
    kind: SimErrorKind::Wgmma,
    help: "after writing a wgmma's shared operands, the writing threads execute `T.ptx.fence.proxy.async_.shared__cta()`, then a barrier",
};

pub(crate) const DSMEM_READER: ProxyReader = ProxyReader {
    what: "the dsmem copy",
    kind: SimErrorKind::DataRace,
    help: "after writing shared memory a dsmem copy reads, the writing thread runs `T.ptx.fence.proxy.async_.shared__cta()` (then a barrier for other threads) before the copy",
};

pub(crate) const TMA_STORE_READER: ProxyReader = ProxyReader {
    what: "the TMA store",
    kind: SimErrorKind::DataRace,
    help: "after writing shared memory a TMA store reads, every writing thread runs `T.ptx.fence.proxy.async_.shared__cta()`, then a barrier orders the writes before the store",
};

impl Machine<'_> {
    /// `fence.proxy.async` by thread `t`: its earlier shared writes become visible to
    /// async-proxy readers it is ordered before; its later accesses are stamped after it.
    pub(crate) fn proxy_fence(&mut self, t: u32) -> Result<(), SimError> {
        let tick = self.tick()?;
        self.fam.asy.rel[t as usize] = tick;
        self.fam.asy.proxy[t as usize].push(tick);
        Ok(())
    }

    /// A shared element the async proxy reads for `reader`: its last generic write must
    /// be followed by a `fence.proxy.async` of the writer that is ordered before `reader`.
    pub(crate) fn proxy_check(&self, b: u32, e: usize, reader: u32, site: u32, r: ProxyReader) -> Result<(), SimError> {
        let Some((p, stamp, wsite)) = self.last_write(b, e) else { return Ok(()) };
        let fences = &self.fam.asy.proxy[p as usize];
        let next = fences.partition_point(|&f| f <= stamp);
        if fences.get(next).is_some_and(|&f| self.ordered(p, f, reader)) {
            return Ok(());
        }
        let why = if next == fences.len() {
            "no `fence.proxy.async` of that thread follows the write"
        } else {
            "the `fence.proxy.async` after it is not ordered before the reader (fence, then a barrier)"
        };
        let msg = format!(
            "{} reads {} element {e} through the async proxy, but {} wrote it through the generic proxy and {why}",
            r.what,
            self.bufs[b as usize].describe(),
            self.who(p)
        );
        let mut err = SimError::new(r.kind, self.prog.sites[site as usize], msg).help(r.help);
        if let Some(s) = wsite {
            err = err.label(s, "written here");
        }
        Err(err)
    }

    /// Executes one instruction of the family for thread `t` (registers at `base`).
    fn asynch(&mut self, t: u32, base: usize, a: &AsyncIns) -> Result<Flow, SimError> {
        let r = |reg: Reg| self.regs[base + reg as usize] as i64;
        match *a {
            AsyncIns::CpAsync { site, dst, dst_idx, src, src_idx, bytes, src_bytes } => {
                let fill = src_bytes.map(r);
                self.cp_async(t, site, (dst, r(dst_idx)), (src, r(src_idx)), bytes, fill)?
            }
            AsyncIns::Commit => {
                let group = std::mem::take(&mut self.fam.asy.open[t as usize]);
                self.fam.asy.groups[t as usize].push_back(group);
            }
            AsyncIns::WaitGroup(n) => {
                while self.fam.asy.groups[t as usize].len() > n as usize {
                    let group = self.fam.asy.groups[t as usize].pop_front().unwrap_or_default();
                    group.into_iter().try_for_each(|p| self.land(t, p))?;
                }
            }
            AsyncIns::MbarInit { site, bar, idx, count } => self.mbar_init(t, site, bar, r(idx), r(count))?,
            AsyncIns::MbarArrive { site, bar, idx, tx } => {
                let tx = tx.map_or(0, r);
                self.mbar_arrive(t, site, bar, r(idx), tx)?
            }
            AsyncIns::MbarArriveRemote { site, bar, idx, rank, cta_scope } => {
                self.mbar_arrive_remote(t, site, bar, r(idx), r(rank), cta_scope)?
            }
            AsyncIns::MbarWait { site, bar, idx, parity } => {
                let (idx, parity) = (r(idx), r(parity));
                let e = self.mbar_elem(t, site, bar, idx, "mbarrier.try_wait.parity")?;
                self.touch(bar, t, e, Dir::Read, site)?;
                return self.mbar_try_wait(t, site, (bar, e), parity);
            }
            // The async proxy (wgmma, TMA stores) reads shared memory after it.
            AsyncIns::ProxyFence => self.proxy_fence(t)?,
            // Within a CTA, mbarrier inits are ordered by the CTA barrier that must follow them;
            // to the cluster's peers the fence releases them at a `.relaxed` cluster arrive too.
            AsyncIns::Fence(_) => self.fam.cluster.init_fence[t as usize] = self.tick()?,
            AsyncIns::Tma(ref x) => self.tma(t, base, x)?,
            AsyncIns::BulkCommit => {
                let stores = std::mem::take(&mut self.fam.asy.bulk_open[t as usize]);
                self.fam.asy.bulk_groups[t as usize].push_back(crate::tma::BulkGroup { stores, read: false });
            }
            AsyncIns::BulkWait { n, read } => self.bulk_wait(t, n as usize, read)?,
            AsyncIns::ClusterArrive { site, relaxed } => self.cluster_arrive(t, site, relaxed)?,
            AsyncIns::ClusterWait { site } => return self.cluster_wait(t, site),
            AsyncIns::GridGroupSync { site, word, idx, size } => {
                self.group_sync_reach(t, site, word, r(idx), r(size))?;
                return Ok(Flow::Block);
            }
            AsyncIns::BulkToPeer { site, dst, dst_idx, src, src_idx, bytes, bar, bar_idx, rank } => {
                let (dst, src, bar) = ((dst, r(dst_idx)), (src, r(src_idx)), (bar, r(bar_idx)));
                self.bulk_to_peer(t, site, dst, src, bytes, bar, r(rank))?
            }
        }
        Ok(Flow::Next)
    }

    fn cp_async(
        &mut self,
        t: u32,
        site: u32,
        (dst, di): (u32, i64),
        (src, si): (u32, i64),
        bytes: u32,
        fill: Option<i64>,
    ) -> Result<(), SimError> {
        let esize = self.bufs[dst as usize].esize;
        let elems = bytes as usize / esize;
        let d = self.bounds(dst, t, di, elems, site, "cp.async store")?;
        self.aligned(dst, t, d, bytes as usize, site, "cp.async store")?;
        let read = fill.unwrap_or(i64::from(bytes));
        if !(0..=i64::from(bytes)).contains(&read) || !(read as usize).is_multiple_of(esize) {
            let msg = format!(
                "cp.async of {bytes} bytes by {} with source size {read}: it must be 0..={bytes} and a whole number of {}-byte elements",
                self.who(t),
                esize
            );
            return Err(SimError::new(SimErrorKind::AsyncCopy, self.prog.sites[site as usize], msg));
        }
        let mut data = [0u8; 16];
        let n = read as usize / esize;
        let mut s = 0;
        if n > 0 {
            s = self.bounds(src, t, si, n, site, "cp.async load")?;
            self.aligned(src, t, s, bytes as usize, site, "cp.async load")?;
            self.read_raw(src, t, s, n, site, &mut data[..read as usize])?;
        }
        if self.opts.check_races {
            for e in d..d + elems {
                if let Some(err) = self.inflight_conflict(dst, t, e, Dir::Write, site) {
                    return Err(err);
                }
                // The copy may write any time from now until it lands: every earlier access
                // must be ordered before the issue, not only before the landing (a read by
                // another warp since the last barrier is a race whichever warp ran first).
                self.write_ordered(dst, t, e, site, false)?;
                self.fam.asy.inflight.insert((dst, e), Flight { t, site, kind: CopyKind::CpAsync });
            }
            for e in s..s + n {
                self.hold_source(src, e, Flight { t, site, kind: CopyKind::CpAsync });
            }
        }
        let p = Pending { site, dst, elem: d, elems, data, src, src_elem: s, src_elems: n };
        self.fam.asy.open[t as usize].push(p);
        Ok(())
    }

    /// Completes copy `p` of thread `t`: its bytes land, stamped now, and it stops reading its source.
    fn land(&mut self, t: u32, p: Pending) -> Result<(), SimError> {
        for e in p.elem..p.elem + p.elems {
            self.fam.asy.inflight.remove(&(p.dst, e));
        }
        for e in p.src_elem..p.src_elem + p.src_elems {
            self.release_source(p.src, e);
        }
        let len = p.elems * self.bufs[p.dst as usize].esize;
        self.write_raw(p.dst, t, p.elem, p.elems, p.site, &p.data[..len])
    }

    /// A copy in flight reads source element `b[e]` (counted per copy).
    pub(crate) fn hold_source(&mut self, b: u32, e: usize, f: Flight) {
        self.fam.asy.inflight_src.entry((b, e)).and_modify(|c| c.1 += 1).or_insert((f, 1));
    }

    /// A copy reading `b[e]` completed its read.
    pub(crate) fn release_source(&mut self, b: u32, e: usize) {
        if let Some(c) = self.fam.asy.inflight_src.get_mut(&(b, e)) {
            c.1 -= 1;
            if c.1 == 0 {
                self.fam.asy.inflight_src.remove(&(b, e));
            }
        }
    }

    /// An access to an element some asynchronous copy will still write, or a write of
    /// an element some asynchronous copy may still read.
    #[cold]
    pub(crate) fn inflight_conflict(&self, b: u32, t: u32, e: usize, dir: Dir, site: u32) -> Option<SimError> {
        if dir.is_write() {
            if let Some(err) = self.source_conflict(b, t, e, site) {
                return Some(err);
            }
        }
        let f = *self.fam.asy.inflight.get(&(b, e))?;
        let verb = if dir.is_write() { "writes" } else { "reads" };
        let name = f.kind.name();
        let copy = match f.kind {
            // Issued by a CTA of the cluster: `f.t` numbers a thread of that CTA, not of this one.
            CopyKind::Dsmem => format!("a {name} into it by thread {} of the issuing CTA", f.t),
            _ if f.t == t => format!("its own {name} into it"),
            _ => format!("a {name} into it by {}", self.who(f.t)),
        };
        let msg = format!(
            "{} element {e}: {} {verb} it while {copy} has not completed",
            self.bufs[b as usize].describe(),
            self.who(t)
        );
        let help = match f.kind {
            CopyKind::CpAsync => "complete the copy first: cp.async.commit_group, cp.async.wait_group, then a barrier for other threads",
            CopyKind::TmaLoad | CopyKind::Dsmem => "wait for the copy's mbarrier phase first (`T.ptx.mbarrier.try_wait(bar, phase)`, or `mbar.wait(stage, phase)`)",
            CopyKind::TmaStore | CopyKind::TmaReduce => {
                "complete the store first: cp.async.bulk.commit_group, then cp.async.bulk.wait_group"
            }
        };
        Some(
            SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg)
                .label(self.prog.sites[f.site as usize], format!("the {name} was issued here"))
                .help(help),
        )
    }

    /// A write of `b[e]` while an asynchronous copy that reads it has not completed.
    #[cold]
    fn source_conflict(&self, b: u32, t: u32, e: usize, site: u32) -> Option<SimError> {
        let &(f, _) = self.fam.asy.inflight_src.get(&(b, e))?;
        let name = f.kind.name();
        let copy = if f.t == t { format!("its own {name}") } else { format!("a {name} by {}", self.who(f.t)) };
        let msg = format!(
            "{} element {e}: {} writes it while {copy} that reads it has not completed (the copy may read its source until {})",
            self.bufs[b as usize].describe(),
            self.who(t),
            f.kind.completion()
        );
        let help = match f.kind {
            CopyKind::TmaStore | CopyKind::TmaReduce => {
                "overwrite a TMA store's source only after cp.async.bulk.wait_group.read (and a barrier for other threads)"
            }
            _ => "overwrite a cp.async source only after the copy completes: cp.async.wait_group (and a barrier for other threads)",
        };
        Some(
            SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg)
                .label(self.prog.sites[f.site as usize], format!("the {name} reading it was issued here"))
                .help(help),
        )
    }

    /// At exit: every copy must be committed and waited for.
    pub(crate) fn async_exit(&self, t: u32) -> Result<(), SimError> {
        let (open, groups) = (&self.fam.asy.open[t as usize], &self.fam.asy.groups[t as usize]);
        let first = open.first().or_else(|| groups.iter().flatten().next());
        let Some(first) = first else {
            return Ok(());
        };
        let waiting: usize = groups.iter().map(Vec::len).sum();
        let mut pending = vec![];
        if !open.is_empty() {
            pending.push(format!("{} cp.async not committed (cp.async.commit_group)", open.len()));
        }
        if waiting > 0 {
            pending.push(format!("{waiting} cp.async in committed groups not waited for (cp.async.wait_group)"));
        }
        let msg = format!("{} exits with {}; their data never lands", self.who(t), pending.join(" and "));
        Err(SimError::new(SimErrorKind::AsyncCopy, self.prog.sites[first.site as usize], msg).help(
            "end every batch of cp.async with cp.async.commit_group and cp.async.wait_group before the data is used",
        ))
    }

    /// The element of an mbarrier operand, bounds-checked.
    fn mbar_elem(&self, t: u32, site: u32, bar: u32, idx: i64, what: &str) -> Result<usize, SimError> {
        self.bounds(bar, t, idx, 1, site, what)
    }

    fn mbar_init(&mut self, t: u32, site: u32, bar: u32, idx: i64, count: i64) -> Result<(), SimError> {
        let e = self.mbar_elem(t, site, bar, idx, "mbarrier.init")?;
        if !(1..=MBAR_MAX_COUNT).contains(&count) {
            let msg = format!(
                "mbarrier.init of `{}[{e}]` by {} with count {count}; it must be 1..={MBAR_MAX_COUNT}",
                self.bufs[bar as usize].name,
                self.who(t)
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg));
        }
        self.touch(bar, t, e, Dir::Write, site)?;
        if let Some(w) = self.bufs[bar as usize].shadow.get(e) {
            self.fam.asy.init_stamps.insert(w[0]);
        }
        let count = count as u32;
        // A re-initialised barrier keeps its slot: landing ticks only grow, so what a
        // thread acquired of its earlier life stays older than its new landings.
        let slot = match self.fam.asy.bars.get(&(bar, e)) {
            Some(old) => old.slot,
            None if self.fam.asy.slots.len() > usize::from(!crate::memory::LANDED) => {
                let msg = format!(
                    "mbarrier.init of `{}[{e}]` by {}: more than {} mbarriers in one CTA",
                    self.bufs[bar as usize].name,
                    self.who(t),
                    u32::from(!crate::memory::LANDED) + 1
                );
                return Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg));
            }
            None => {
                self.fam.asy.slots.push((bar, e));
                self.fam.asy.slots.len() as u32 - 1
            }
        };
        let b = Barrier {
            count,
            pending: count,
            tx: 0,
            phase: 0,
            arriving: vec![0; self.n],
            released: vec![0; self.n],
            copies: vec![],
            slot,
            init_by: t,
            arriving_tma: vec![],
            released_tma: vec![],
            arriving_peer: vec![],
            released_peer: vec![],
        };
        if let Some(old) = self.fam.asy.bars.insert((bar, e), b) {
            if let Some(c) = old.copies.first() {
                return Err(self.reinit_in_flight(t, site, (bar, e), c));
            }
        }
        Ok(())
    }

    fn uninit_barrier(&self, t: u32, site: u32, bar: u32, e: usize, what: &str) -> SimError {
        let msg = format!(
            "{what} on `{}[{e}]` by {}, which no thread of this CTA initialised",
            self.bufs[bar as usize].name,
            self.who(t)
        );
        SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg)
            .help("initialise the barrier with mbarrier.init (one thread), then a CTA barrier, before using it")
    }

    pub(crate) fn mbar_arrive(&mut self, t: u32, site: u32, bar: u32, idx: i64, tx: i64) -> Result<(), SimError> {
        let what = if tx == 0 { "mbarrier.arrive" } else { "mbarrier.arrive.expect_tx" };
        let e = self.mbar_elem(t, site, bar, idx, what)?;
        if !(0..=MBAR_MAX_COUNT).contains(&tx) {
            let msg = format!(
                "{what} on `{}[{e}]` by {} with {tx} transaction bytes; it must be 0..={MBAR_MAX_COUNT}",
                self.bufs[bar as usize].name,
                self.who(t)
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg));
        }
        if !self.fam.asy.bars.contains_key(&(bar, e)) {
            return Err(self.uninit_barrier(t, site, bar, e, what));
        }
        self.touch(bar, t, e, Dir::Read, site)?;
        let tick = self.tick()?;
        // The lanes of the arriving thread's warp: their accesses before its last `__syncwarp`
        // (or CTA / named barrier) happen before the arrive, so it releases them too; and so
        // the other warps' accesses before the named barrier it last passed with each of them
        // (producer threads that write an operand, fence and meet at a barrier, and one of them
        // arrives: CUTLASS's and FlashAttention-3's hand-off).
        let (w, warp_sync) = (t / 32, self.wsync[(t / 32) as usize]);
        let lanes = (w * 32) as usize..((w * 32 + 32) as usize).min(self.n);
        let named: Vec<(usize, u32)> = (0..self.n.div_ceil(32))
            .filter(|&q| q != w as usize)
            .map(|q| (q, self.named_synced(t, (q * 32) as u32)))
            .filter(|&(_, tick)| tick > 0)
            .collect();
        let (name, who, span) = (&self.bufs[bar as usize].name, self.who(t), self.prog.sites[site as usize]);
        let Some(b) = self.fam.asy.bars.get_mut(&(bar, e)) else {
            return Ok(());
        };
        if b.pending == 0 {
            let msg = format!(
                "{what} on `{name}[{e}]` by {who}: phase {} already has all {} arrivals and waits for {} transaction bytes",
                b.phase, b.count, b.tx
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, span, msg));
        }
        b.pending -= 1;
        b.tx += tx;
        let n = self.n;
        if let Some(row) = self.fam.asy.acq.get(t as usize * n..(t as usize + 1) * n) {
            join(&mut b.arriving, row);
        }
        if let Some(row) = self.fam.asy.acq_tma.get(t as usize) {
            join_grow(&mut b.arriving_tma, row);
        }
        join_grow(&mut b.arriving_peer, &self.fam.asy.peer[t as usize]);
        for q in lanes {
            b.arriving[q] = b.arriving[q].max(warp_sync);
        }
        for (q, synced) in named {
            for p in q * 32..(q * 32 + 32).min(n) {
                b.arriving[p] = b.arriving[p].max(synced);
            }
        }
        b.arriving[t as usize] = tick;
        self.fam.asy.rel[t as usize] = tick;
        self.tx_in_range(t, site, (bar, e))?;
        self.complete_if_done((bar, e))
    }

    /// In the running CTA: an arrival on `bar[e]` by thread `t` of the cluster's CTA of rank
    /// `from` (`Machine::mbar_arrive_remote`), releasing `known` (its `AsyncState::peer` row).
    pub(crate) fn arrive_from_peer(
        &mut self,
        t: u32,
        site: u32,
        (bar, e): (u32, usize),
        known: &[u32],
        phase: Option<usize>,
        from: usize,
    ) -> Result<(), SimError> {
        let (name, span) = (&self.bufs[bar as usize].name, self.prog.sites[site as usize]);
        if !self.peer_barrier_ready(bar, e, phase) {
            let msg = format!(
                "mbarrier.arrive by thread {t} of CTA rank {from} on `{name}[{e}]` of CTA rank {}, which is not initialised before a cluster barrier the arrive follows",
                self.rank
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, span, msg).help(
                "initialise the barrier in every CTA, then `T.ptx.fence.mbarrier_init.release.cluster()` and `T.cuda.cluster_sync()`, before peers arrive on it",
            ));
        }
        let Some(b) = self.fam.asy.bars.get_mut(&(bar, e)) else {
            return Ok(());
        };
        if b.pending == 0 {
            let msg = format!(
                "mbarrier.arrive by thread {t} of CTA rank {from} on `{name}[{e}]` of CTA rank {}: phase {} already has all {} arrivals and waits for {} transaction bytes",
                self.rank, b.phase, b.count, b.tx
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, span, msg));
        }
        b.pending -= 1;
        join_grow(&mut b.arriving_peer, known);
        self.complete_if_done((bar, e))
    }

    /// The phase's transaction count stays within the hardware's ±(2^20 - 1).
    pub(crate) fn tx_in_range(&self, t: u32, site: u32, key: (u32, usize)) -> Result<(), SimError> {
        let Some(b) = self.fam.asy.bars.get(&key) else { return Ok(()) };
        if b.tx.abs() <= MBAR_MAX_COUNT {
            return Ok(());
        }
        let msg = format!(
            "the transaction count of `{}[{}]` reaches {} bytes in phase {} (by {}); an mbarrier phase counts at most {MBAR_MAX_COUNT}",
            self.bufs[key.0 as usize].name,
            key.1,
            b.tx,
            b.phase,
            self.who(t)
        );
        Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg)
            .help("split the copies over more phases (more pipeline stages, or smaller tiles)"))
    }

    /// Completes the current phase of barrier `key` when its arrivals and bytes are all
    /// in: the TMA loads attached to it land (stamped now), and waiters may pass.
    pub(crate) fn complete_if_done(&mut self, key: (u32, usize)) -> Result<(), SimError> {
        let done = self.fam.asy.bars.get(&key).is_some_and(|b| b.pending == 0 && b.tx == 0);
        if !done {
            return Ok(());
        }
        let Some(b) = self.fam.asy.bars.get_mut(&key) else {
            return Ok(());
        };
        let (copies, slot) = (std::mem::take(&mut b.copies), b.slot);
        let landed = if copies.is_empty() { 0 } else { self.tick()? };
        for c in &copies {
            self.land_tma(c, slot, landed)?;
        }
        if let Some(b) = self.fam.asy.bars.get_mut(&key) {
            for c in &copies {
                join_grow(&mut b.arriving_peer, &c.known);
            }
            if !copies.is_empty() {
                let s = slot as usize;
                if b.arriving_tma.len() <= s {
                    b.arriving_tma.resize(s + 1, 0);
                }
                b.arriving_tma[s] = b.arriving_tma[s].max(landed);
            }
            complete_phase(b);
        }
        Ok(())
    }

    /// Re-initialising a barrier whose phase still has TMA loads to complete.
    fn reinit_in_flight(&self, t: u32, site: u32, (bar, e): (u32, usize), c: &crate::tma::Landing) -> SimError {
        let msg = format!(
            "mbarrier.init of `{}[{e}]` by {} while a TMA load issued by thread {} still completes on it",
            self.bufs[bar as usize].name,
            self.who(t),
            c.issuer
        );
        SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg)
            .label(self.prog.sites[c.site as usize], "the TMA load was issued here")
            .help("initialise each barrier once, before the copies that complete on it")
    }

    /// Whether the phase of parity `parity` of barrier `(bar, e)` has completed;
    /// if so, thread `t` acquires what its arrivals released.
    fn mbar_try_wait(&mut self, t: u32, site: u32, (bar, e): (u32, usize), parity: i64) -> Result<Flow, SimError> {
        let Some(b) = self.fam.asy.bars.get(&(bar, e)) else {
            return Err(self.uninit_barrier(t, site, bar, e, "mbarrier.try_wait.parity"));
        };
        if !(0..=1).contains(&parity) {
            let msg = format!(
                "mbarrier.try_wait.parity on `{}[{e}]` by {} with parity {parity}; it is 0 or 1",
                self.bufs[bar as usize].name,
                self.who(t)
            );
            return Err(SimError::new(SimErrorKind::Mbarrier, self.prog.sites[site as usize], msg));
        }
        if i64::from(b.phase & 1) == parity {
            return Ok(Flow::Block);
        }
        let (n, done) = (self.n, b.phase);
        if let Some(row) = self.fam.asy.acq.get_mut(t as usize * n..(t as usize + 1) * n) {
            join(row, &b.released);
        }
        if let Some(row) = self.fam.asy.acq_tma.get_mut(t as usize) {
            join_grow(row, &b.released_tma);
        }
        join_grow(&mut self.fam.asy.peer[t as usize], &b.released_peer);
        // (the peers' remote arrives on the completed phases reached this CTA: it may exit)
        let me = self.rank;
        self.peer_arrives.retain(|a| !(a.peer == me && a.bar == bar && a.e == e && a.phase < done));
        Ok(Flow::Next)
    }

    /// Wakes the threads whose mbarrier wait has completed; returns whether any woke.
    pub(crate) fn release_mbar_waits(&mut self) -> Result<bool, SimError> {
        let mut progressed = false;
        if self.fam.asy.bars.is_empty() {
            return Ok(false); // nobody can be waiting on a barrier
        }
        for t in 0..self.n {
            if self.state[t] != State::Waiting {
                continue;
            }
            let Some((site, bar, e, parity)) = self.mbar_wait_at(t) else {
                continue;
            };
            if let Flow::Next = self.mbar_try_wait(t as u32, site, (bar, e), parity)? {
                self.state[t] = State::Runnable;
                self.pcs[t] += 1;
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// `(site, barrier buffer, element, parity)` when thread `t` waits at an mbarrier.
    fn mbar_wait_at(&self, t: usize) -> Option<(u32, u32, usize, i64)> {
        let AsyncIns::MbarWait { site, bar, idx, parity } = *self.prog.code[self.pcs[t] as usize].family()? else {
            return None;
        };
        let base = t * self.prog.nregs;
        let e = self.regs[base + idx as usize] as i64;
        Some((site, bar, usize::try_from(e).ok()?, self.regs[base + parity as usize] as i64))
    }

    /// Threads blocked on mbarrier phases that can no longer complete (nothing else can run).
    pub(crate) fn diagnose_mbar_deadlock(&self) -> Option<SimError> {
        let waiters: Vec<(usize, (u32, u32, usize, i64))> = (0..self.n)
            .filter(|&t| self.state[t] == State::Waiting)
            .filter_map(|t| self.mbar_wait_at(t).map(|w| (t, w)))
            .collect();
        let &(t0, (site, bar, e, parity)) = waiters.first()?;
        let same: Vec<u32> =
            waiters.iter().filter(|(_, w)| (w.1, w.2, w.3) == (bar, e, parity)).map(|(t, _)| *t as u32).collect();
        let pc = self.pcs[t0];
        let b = self.fam.asy.bars.get(&(bar, e))?;
        let name = &self.bufs[bar as usize].name;
        let mut err = SimError::new(SimErrorKind::Deadlock, self.prog.sites[site as usize], String::new()).help(
            "every phase a thread waits for needs its full arrival count (and its transaction bytes); check the init count and which threads arrive",
        );
        let others = self.whereabouts(0..self.n, pc, "threads", &mut err);
        let tx = crate::tma::missing_bytes(b.tx, &b.copies);
        let others = if others.is_empty() { String::new() } else { format!("; {others}") };
        let arrivals = if b.pending > 0 {
            format!(" with {} of {} arrivals still missing", b.pending, b.count)
        } else {
            String::new()
        };
        err.message = format!(
            "threads {} of CTA ({}, {}, {}) wait at mbarrier.try_wait.parity on `{name}[{e}]` for the phase of parity {parity}, but the barrier is in phase {}{arrivals}{tx}, and no thread can arrive{others}",
            ranges(&same),
            self.cta[0],
            self.cta[1],
            self.cta[2],
            b.phase,
        );
        Some(err)
    }
}

/// The phase's arrivals are released to future waiters; the next phase expects the full count.
fn complete_phase(b: &mut Barrier) {
    join(&mut b.released, &b.arriving);
    b.arriving.fill(0);
    join_grow(&mut b.released_tma, &b.arriving_tma);
    b.arriving_tma.clear();
    join_grow(&mut b.released_peer, &b.arriving_peer);
    b.arriving_peer.clear();
    b.phase = b.phase.wrapping_add(1);
    b.pending = b.count;
    b.tx = 0;
}

/// `into[i] = max(into[i], from[i])`: the join of two vector clocks.
pub(crate) fn join(into: &mut [u32], from: &[u32]) {
    for (a, &b) in into.iter_mut().zip(from) {
        *a = (*a).max(b);
    }
}

/// [`join`] into a row that may be shorter (missing entries are 0): it grows to `from`'s length.
pub(crate) fn join_grow(into: &mut Vec<u32>, from: &[u32]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    join(into, from);
}
