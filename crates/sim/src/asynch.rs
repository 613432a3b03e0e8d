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
//! down, `expect_tx` adds pending transaction bytes (only bulk async copies
//! complete them, and none exist yet); when both reach zero the phase completes
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

use crate::compile::{Compiler, Ins, Reg};
use crate::error::{ranges, SimError, SimErrorKind};
use crate::exec::{Machine, State};
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
    MbarWait {
        site: u32,
        bar: u32,
        idx: Reg,
        parity: Reg,
    },
    /// `fence.proxy.async.shared::cta`: orders the thread's shared writes before later wgmma reads.
    ProxyFence,
    /// Another fence (`fence.mbarrier_init`): nothing to order in the simulator.
    Fence(&'static str),
}

impl AsyncIns {
    /// The PTX name, for diagnostics.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            AsyncIns::CpAsync { .. } => "cp.async",
            AsyncIns::Commit => "cp.async.commit_group",
            AsyncIns::WaitGroup(_) => "cp.async.wait_group",
            AsyncIns::MbarInit { .. } => "mbarrier.init",
            AsyncIns::MbarArrive { tx: None, .. } => "mbarrier.arrive",
            AsyncIns::MbarArrive { tx: Some(_), .. } => "mbarrier.arrive.expect_tx",
            AsyncIns::MbarWait { .. } => "mbarrier.try_wait.parity",
            AsyncIns::ProxyFence => "fence.proxy.async.shared::cta",
            AsyncIns::Fence(name) => name,
        }
    }

    /// The site of the instructions that can fail or block.
    pub(crate) fn site(&self) -> Option<u32> {
        match self {
            AsyncIns::CpAsync { site, .. }
            | AsyncIns::MbarInit { site, .. }
            | AsyncIns::MbarArrive { site, .. }
            | AsyncIns::MbarWait { site, .. } => Some(*site),
            AsyncIns::Commit | AsyncIns::WaitGroup(_) | AsyncIns::ProxyFence | AsyncIns::Fence(_) => None,
        }
    }

    pub(crate) fn for_each_reg(&mut self, mut f: impl FnMut(&mut Reg)) {
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
            AsyncIns::Commit | AsyncIns::WaitGroup(_) | AsyncIns::ProxyFence | AsyncIns::Fence(_) => {}
        }
    }
}

/// What the thread does after an instruction.
pub(crate) enum Flow {
    Next,
    /// Wait here (an mbarrier phase that has not completed).
    Block,
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
struct Barrier {
    count: u32,
    /// Arrivals still expected in the current phase.
    pending: u32,
    /// Transaction bytes still expected in the current phase.
    tx: i64,
    /// The current phase (completed phases so far).
    phase: u32,
    /// What the current phase's arrivals release, per thread: the arrive ticks,
    /// joined with what each arriving thread had acquired (so ordering is transitive).
    arriving: Vec<u32>,
    /// The same for the completed phases: what a waiter acquires.
    released: Vec<u32>,
}

/// The per-CTA state of the family.
pub(crate) struct AsyncState {
    /// Per thread: copies issued since its last commit.
    open: Vec<Vec<Pending>>,
    /// Per thread: committed groups, oldest first.
    groups: Vec<VecDeque<Vec<Pending>>>,
    /// Destination elements of copies in flight: (buffer, element) -> (thread, site).
    pub inflight: HashMap<(u32, usize), (u32, u32)>,
    /// Source elements of copies in flight: (buffer, element) -> (thread, site, copies
    /// reading it). The hardware may read a source any time before the copy completes,
    /// so writing one meanwhile is a race.
    pub inflight_src: HashMap<(u32, usize), (u32, u32, u32)>,
    bars: HashMap<(u32, usize), Barrier>,
    /// Per thread: the tick of its last arrive (0: none in this CTA).
    pub rel: Vec<u32>,
    /// `acq[t * n + p]`: the newest arrive tick of `p` that `t` acquired; empty
    /// unless the kernel uses mbarriers.
    acq: Vec<u32>,
    n: usize,
}

impl AsyncState {
    pub(crate) fn new(n: usize, mbarriers: bool) -> AsyncState {
        AsyncState {
            open: vec![vec![]; n],
            groups: vec![VecDeque::new(); n],
            inflight: HashMap::new(),
            inflight_src: HashMap::new(),
            bars: HashMap::new(),
            rel: vec![0; n],
            acq: if mbarriers { vec![0; n * n] } else { vec![] },
            n,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.open.iter_mut().for_each(Vec::clear);
        self.groups.iter_mut().for_each(VecDeque::clear);
        self.inflight.clear();
        self.inflight_src.clear();
        self.bars.clear();
        self.rel.fill(0);
        self.acq.fill(0);
    }

    /// `__syncwarp` over `lanes`: each lane now has what any of them acquired.
    pub(crate) fn warp_sync(&mut self, lanes: std::ops::Range<usize>) {
        self.sync_threads(lanes);
    }

    /// A barrier over the threads `ts` (`__syncwarp`, a named barrier): each of
    /// them now has what any of them acquired.
    pub(crate) fn sync_threads(&mut self, ts: impl Iterator<Item = usize> + Clone) {
        if self.acq.is_empty() {
            return;
        }
        let n = self.n;
        let mut joined = vec![0; n];
        for t in ts.clone() {
            join(&mut joined, &self.acq[t * n..(t + 1) * n]);
        }
        for t in ts {
            self.acq[t * n..(t + 1) * n].copy_from_slice(&joined);
        }
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

impl Compiler<'_> {
    pub(crate) fn asynch(&mut self, a: &AsyncOp) -> Result<(), SimError> {
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
            AsyncOp::MbarArrive { bar } => {
                let (b, idx) = (self.mbar_buf(bar)?, self.index(&bar.index)?);
                AsyncIns::MbarArrive { site: self.site(), bar: b, idx, tx: None }
            }
            AsyncOp::MbarArriveExpectTx { bar, bytes } => {
                let (b, idx, tx) = self.mbar(bar, bytes)?;
                AsyncIns::MbarArrive { site: self.site(), bar: b, idx, tx: Some(tx) }
            }
            AsyncOp::MbarWait { bar, parity } => {
                let (b, idx, parity) = self.mbar(bar, parity)?;
                AsyncIns::MbarWait { site: self.site(), bar: b, idx, parity }
            }
            AsyncOp::FenceProxyAsync => AsyncIns::ProxyFence,
            AsyncOp::FenceMbarrierInit => AsyncIns::Fence(a.name()),
        };
        self.emit(Ins::Async(Box::new(ins)));
        Ok(())
    }

    /// The barrier's buffer, index register and an int32 operand register.
    fn mbar(&mut self, bar: &Mbar, operand: &LExpr) -> Result<(u32, Reg, Reg), SimError> {
        let b = self.mbar_buf(bar)?;
        let idx = self.index(&bar.index)?;
        Ok((b, idx, self.expr_as(operand, DType::I32)?))
    }

    fn mbar_buf(&self, bar: &Mbar) -> Result<u32, SimError> {
        let b = self.buf(bar.buf)?;
        let lb = &self.k.bufs[b as usize];
        if lb.space != Space::Shared || lb.dtype != DType::I64 {
            return Err(self.invalid(format!("mbarrier in `{}`, which is not a shared int64 buffer", lb.name)));
        }
        Ok(b)
    }
}

impl Machine<'_> {
    /// Executes one instruction of the family for thread `t` (registers at `base`).
    pub(crate) fn asynch(&mut self, t: u32, base: usize, a: &AsyncIns) -> Result<Flow, SimError> {
        let r = |reg: Reg| self.regs[base + reg as usize] as i64;
        match *a {
            AsyncIns::CpAsync { site, dst, dst_idx, src, src_idx, bytes, src_bytes } => {
                let fill = src_bytes.map(r);
                self.cp_async(t, site, (dst, r(dst_idx)), (src, r(src_idx)), bytes, fill)?
            }
            AsyncIns::Commit => {
                let group = std::mem::take(&mut self.asy.open[t as usize]);
                self.asy.groups[t as usize].push_back(group);
            }
            AsyncIns::WaitGroup(n) => {
                while self.asy.groups[t as usize].len() > n as usize {
                    let group = self.asy.groups[t as usize].pop_front().unwrap_or_default();
                    group.into_iter().try_for_each(|p| self.land(t, p))?;
                }
            }
            AsyncIns::MbarInit { site, bar, idx, count } => self.mbar_init(t, site, bar, r(idx), r(count))?,
            AsyncIns::MbarArrive { site, bar, idx, tx } => {
                let tx = tx.map_or(0, r);
                self.mbar_arrive(t, site, bar, r(idx), tx)?
            }
            AsyncIns::MbarWait { site, bar, idx, parity } => {
                let (idx, parity) = (r(idx), r(parity));
                let e = self.mbar_elem(t, site, bar, idx, "mbarrier.try_wait.parity")?;
                self.touch(bar, t, e, Dir::Read, site)?;
                return self.mbar_try_wait(t, site, (bar, e), parity);
            }
            // wgmma reads shared memory through the async proxy (module `wgmma`).
            AsyncIns::ProxyFence => self.proxy_fence(t)?,
            // No clusters exist in the simulator; within a CTA, mbarrier inits are
            // ordered by the CTA barrier that must follow them.
            AsyncIns::Fence(_) => {}
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
                self.asy.inflight.insert((dst, e), (t, site));
            }
            for e in s..s + n {
                self.asy.inflight_src.entry((src, e)).and_modify(|c| c.2 += 1).or_insert((t, site, 1));
            }
        }
        let p = Pending { site, dst, elem: d, elems, data, src, src_elem: s, src_elems: n };
        self.asy.open[t as usize].push(p);
        Ok(())
    }

    /// Completes copy `p` of thread `t`: its bytes land, stamped now, and it stops reading its source.
    fn land(&mut self, t: u32, p: Pending) -> Result<(), SimError> {
        for e in p.elem..p.elem + p.elems {
            self.asy.inflight.remove(&(p.dst, e));
        }
        for e in p.src_elem..p.src_elem + p.src_elems {
            if let Some(c) = self.asy.inflight_src.get_mut(&(p.src, e)) {
                c.2 -= 1;
                if c.2 == 0 {
                    self.asy.inflight_src.remove(&(p.src, e));
                }
            }
        }
        let len = p.elems * self.bufs[p.dst as usize].esize;
        self.write_raw(p.dst, t, p.elem, p.elems, p.site, &p.data[..len])
    }

    /// An access to an element some cp.async will still write, or a write of an
    /// element some cp.async may still read.
    #[cold]
    pub(crate) fn inflight_conflict(&self, b: u32, t: u32, e: usize, dir: Dir, site: u32) -> Option<SimError> {
        if dir.is_write() {
            if let Some(err) = self.source_conflict(b, t, e, site) {
                return Some(err);
            }
        }
        let &(p, issued) = self.asy.inflight.get(&(b, e))?;
        let verb = if dir.is_write() { "writes" } else { "reads" };
        let copy = if p == t {
            "its own cp.async into it".to_string()
        } else {
            format!("a cp.async into it by {}", self.who(p))
        };
        let msg = format!(
            "{} element {e}: {} {verb} it while {copy} has not completed",
            self.bufs[b as usize].describe(),
            self.who(t)
        );
        Some(
            SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg)
                .label(self.prog.sites[issued as usize], "the cp.async was issued here")
                .help("complete the copy first: cp.async.commit_group, cp.async.wait_group, then a barrier for other threads"),
        )
    }

    /// A write of `b[e]` while a cp.async that reads it has not completed.
    #[cold]
    fn source_conflict(&self, b: u32, t: u32, e: usize, site: u32) -> Option<SimError> {
        let &(p, issued, _) = self.asy.inflight_src.get(&(b, e))?;
        let copy = if p == t { "its own cp.async".to_string() } else { format!("a cp.async by {}", self.who(p)) };
        let msg = format!(
            "{} element {e}: {} writes it while {copy} that reads it has not completed (the copy may read its source until cp.async.wait_group)",
            self.bufs[b as usize].describe(),
            self.who(t)
        );
        Some(
            SimError::new(SimErrorKind::DataRace, self.prog.sites[site as usize], msg)
                .label(self.prog.sites[issued as usize], "the cp.async reading it was issued here")
                .help("overwrite a cp.async source only after the copy completes: cp.async.wait_group (and a barrier for other threads)"),
        )
    }

    /// At exit: every copy must be committed and waited for.
    pub(crate) fn async_exit(&self, t: u32) -> Result<(), SimError> {
        let (open, groups) = (&self.asy.open[t as usize], &self.asy.groups[t as usize]);
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
        let count = count as u32;
        let b =
            Barrier { count, pending: count, tx: 0, phase: 0, arriving: vec![0; self.n], released: vec![0; self.n] };
        self.asy.bars.insert((bar, e), b);
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

    fn mbar_arrive(&mut self, t: u32, site: u32, bar: u32, idx: i64, tx: i64) -> Result<(), SimError> {
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
        if !self.asy.bars.contains_key(&(bar, e)) {
            return Err(self.uninit_barrier(t, site, bar, e, what));
        }
        self.touch(bar, t, e, Dir::Read, site)?;
        let tick = self.tick()?;
        let (name, who, span) = (&self.bufs[bar as usize].name, self.who(t), self.prog.sites[site as usize]);
        let Some(b) = self.asy.bars.get_mut(&(bar, e)) else {
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
        if let Some(row) = self.asy.acq.get(t as usize * n..(t as usize + 1) * n) {
            join(&mut b.arriving, row);
        }
        b.arriving[t as usize] = tick;
        if b.pending == 0 && b.tx == 0 {
            complete_phase(b);
        }
        self.asy.rel[t as usize] = tick;
        Ok(())
    }

    /// Whether the phase of parity `parity` of barrier `(bar, e)` has completed;
    /// if so, thread `t` acquires what its arrivals released.
    fn mbar_try_wait(&mut self, t: u32, site: u32, (bar, e): (u32, usize), parity: i64) -> Result<Flow, SimError> {
        let Some(b) = self.asy.bars.get(&(bar, e)) else {
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
        let n = self.n;
        if let Some(row) = self.asy.acq.get_mut(t as usize * n..(t as usize + 1) * n) {
            join(row, &b.released);
        }
        Ok(Flow::Next)
    }

    /// Wakes the threads whose mbarrier wait has completed; returns whether any woke.
    pub(crate) fn release_mbar_waits(&mut self) -> Result<bool, SimError> {
        let mut progressed = false;
        if self.asy.bars.is_empty() {
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
        let Ins::Async(a) = &self.prog.code[self.pcs[t] as usize] else {
            return None;
        };
        let AsyncIns::MbarWait { site, bar, idx, parity } = **a else {
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
        let b = self.asy.bars.get(&(bar, e))?;
        let name = &self.bufs[bar as usize].name;
        let mut err = SimError::new(SimErrorKind::Deadlock, self.prog.sites[site as usize], String::new()).help(
            "every phase a thread waits for needs its full arrival count (and its transaction bytes); check the init count and which threads arrive",
        );
        let others = self.whereabouts(0..self.n, pc, "threads", &mut err);
        let tx = if b.tx > 0 {
            format!(" and {} transaction bytes (which only bulk async copies complete; none are in flight)", b.tx)
        } else {
            String::new()
        };
        let others = if others.is_empty() { String::new() } else { format!("; {others}") };
        err.message = format!(
            "threads {} of CTA ({}, {}, {}) wait at mbarrier.try_wait.parity on `{name}[{e}]` for the phase of parity {parity}, but the barrier is in phase {} with {} of {} arrivals{tx} still missing, and no thread can arrive{others}",
            ranges(&same),
            self.cta[0],
            self.cta[1],
            self.cta[2],
            b.phase,
            b.pending,
            b.count,
        );
        Some(err)
    }
}

/// The phase's arrivals are released to future waiters; the next phase expects the full count.
fn complete_phase(b: &mut Barrier) {
    join(&mut b.released, &b.arriving);
    b.arriving.fill(0);
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
