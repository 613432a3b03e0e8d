//! The machine: runs every CTA, every thread, with barrier and warp-collective
//! semantics.
//!
//! Scheduling: within a CTA each thread runs until it blocks (a barrier, a
//! warp-collective instruction, or an mbarrier wait whose phase has not
//! completed) or exits. When no thread can run, the members a group
//! instruction needs (`__syncwarp`, ldmatrix, stmatrix: the whole warp; a
//! shuffle: its member mask; wgmma: the warpgroup) execute it once they all
//! wait at it; if every thread waits at the same `__syncthreads`, the CTA
//! passes it; threads blocked on a family's state (named barriers, mbarrier
//! phases, the cluster barrier) wake up when it lets them. Anything else is a
//! hang on the GPU and is reported with who waits where (a deadlock when
//! threads wait on mbarriers). Threads only communicate through memory, and
//! unordered conflicting accesses are reported as races, so running threads one
//! after another gives the GPU's result for every race-free kernel.
//!
//! This module runs the scalar core inline and knows every other instruction
//! only as a family's [`FamilyIns`](crate::family::FamilyIns): who executes it,
//! what a thread and what its group does, how to name it.

use crate::arith::{self, ArithFault};
use crate::bank::{BankCollector, PointKey};
use crate::compile::{Ins, Program, MAX_WHILE_TRIPS};
use crate::error::{ranges, SimError, SimErrorKind, SimWarning};
use crate::family::{Divergence, FamilyState, Flow, Group};
use crate::memory::{BufMem, Dir};
use crate::round;
use crate::value::{decode, encode};
use crate::{SimOptions, SimReport};
use std::collections::HashMap;
use tirx_ir::lir::{LBuf, LKernel, Space};
use tirx_ir::DType;

/// Static shared memory a kernel may declare without `extern __shared__` (48 KiB).
const STATIC_SMEM_LIMIT: u64 = tirx_ir::target::STATIC_SMEM_LIMIT;
/// Shared memory per CTA: the simulator models sm_90 (227 KiB with the opt-in
/// attribute); lowering checks the actual target's limit at the allocation.
const SMEM_LIMIT: u64 = tirx_ir::Arch::SM_90.max_smem_per_cta();
/// Local memory per thread CUDA allows (512 KiB).
const LOCAL_LIMIT: usize = 512 * 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    Runnable,
    Waiting,
    Exited,
}

pub(crate) struct Machine<'a> {
    pub k: &'a LKernel,
    pub prog: &'a Program,
    pub opts: &'a SimOptions,
    pub bufs: Vec<BufMem>,
    /// Threads per CTA.
    pub(crate) n: usize,
    /// Most mbarrier slots a CTA can number (`Machine::peer_landing_slot`).
    pub(crate) barrier_slots: usize,
    pub(crate) regs: Vec<u64>,
    pub(crate) pcs: Vec<u32>,
    pub(crate) state: Vec<State>,
    pub cta: [u32; 3],
    /// The state of the warp-order generator ([`SimOptions::warp_order_seed`]).
    order_rng: u64,
    clock: u32,
    pub cta_start: u32,
    pub cta_sync: u32,
    pub wsync: Vec<u32>,
    /// `(cta_start stamp, CTA)` of every CTA run so far, in stamp order.
    pub cta_starts: Vec<(u32, [u32; 3])>,
    pub warnings: Vec<SimWarning>,
    pub warn_at: HashMap<(u32, u32), usize>,
    /// Same-value write races already warned about, by (site, buffer).
    pub warn_same_at: HashMap<(u32, u32), usize>,
    pub(crate) bank: Option<BankCollector>,
    /// The per-CTA state of the families that keep one (`family`).
    pub(crate) fam: FamilyState,
    insts: u64,
    /// The parked CTAs of the running cluster (`cluster`; empty without clusters) and
    /// the rank of the running CTA.
    pub(crate) ctxs: Vec<crate::cluster::CtaCtx>,
    pub(crate) rank: usize,
    /// Completed cluster barrier phases, and per phase (mod 3) the earliest arrive tick in it
    /// of any thread of the cluster (`ClusterThreads`).
    pub(crate) cluster_phase: u32,
    pub(crate) cluster_min_arrive: [u32; 3],
    pub(crate) peer_copies: Vec<crate::cluster::PeerCopy>,
    /// Remote mbarrier arrives not yet ordered before their target CTA's exit.
    pub(crate) peer_arrives: Vec<crate::cluster::PeerArrive>,
    /// The phases of each grid group barrier word `(buffer, element)` (`grid_group`).
    pub(crate) group_words: HashMap<(u32, usize), crate::grid_group::GroupWord>,
    /// What the threads printed (`debug`), in execution order.
    pub(crate) printed: Vec<crate::debug::Printed>,
    /// The release sequences of global elements updated by atomics after fences (`fence`).
    pub(crate) releases: crate::fence::ReleaseSequences,
}

pub(crate) fn run(
    k: &LKernel,
    prog: &Program,
    params: &mut [Vec<u8>],
    storage: &[u32],
    opts: &SimOptions,
) -> Result<SimReport, SimError> {
    let own = |id: &tirx_ir::lir::LBufId| storage.get(id.0 as usize).is_none_or(|&s| s == id.0);
    let mut m = Machine::new(k, prog, opts, params, &own)?;
    let result = m.run_grid();
    // Hand the parameter bytes back, also after an error (they hold what ran so far);
    // a parameter sharing another's memory gets a copy of it.
    for (i, id) in k.params.iter().enumerate() {
        if own(id) {
            params[i] = std::mem::take(&mut m.bufs[id.0 as usize].data);
        }
    }
    for (i, id) in k.params.iter().enumerate() {
        if !own(id) {
            let first = k.params.iter().position(|p| p.0 == storage[id.0 as usize]).unwrap_or(i);
            params[i] = params[first].clone();
        }
    }
    let printed = crate::debug::in_thread_order(std::mem::take(&mut m.printed));
    let ctas_run = result.map_err(|e| SimError { printed: Some(Box::new(printed.clone())), ..e })?;
    let names: Vec<String> = m.bufs.iter().map(|b| b.name.clone()).collect();
    let bank = m.bank.take().map(|b| b.report(|i| names[i as usize].clone())).unwrap_or_default();
    Ok(SimReport { warnings: m.warnings, bank, ctas_run, instructions: m.insts, printed })
}

fn limit_error(msg: String) -> SimError {
    SimError::new(SimErrorKind::ResourceLimit, Default::default(), msg)
}

/// Launch shape, parameters and memory limits, checked before anything runs.
pub(crate) fn check_launch(k: &LKernel, params: &[Vec<u8>], opts: &SimOptions) -> Result<(), SimError> {
    if k.grid.contains(&0) || k.block.contains(&0) {
        return Err(limit_error(format!("launch of grid {:?} × block {:?} has an empty dimension", k.grid, k.block)));
    }
    let threads = k.block.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
    if threads > 1024 {
        return Err(limit_error(format!("{threads} threads per CTA; CUDA allows at most 1024"))
            .help("use fewer threads per CTA and more CTAs"));
    }
    if params.len() != k.params.len() {
        return Err(SimError::new(
            SimErrorKind::BadArgument,
            Default::default(),
            format!("kernel `{}` takes {} parameters, {} buffers were given", k.name, k.params.len(), params.len()),
        ));
    }
    let invalid = |msg: String| SimError::new(SimErrorKind::InvalidKernel, Default::default(), msg);
    for (i, id) in k.params.iter().enumerate() {
        if k.params[..i].contains(id) {
            return Err(invalid(format!("buffer id {} is passed as two parameters", id.0)));
        }
        let b = k
            .bufs
            .get(id.0 as usize)
            .ok_or_else(|| invalid(format!("parameter {i} names buffer id {}, which does not exist", id.0)))?;
        if b.space != Space::Global {
            return Err(invalid(format!("parameter `{}` is not a global buffer", b.name)));
        }
        let want = byte_size(b);
        if params[i].len() != want {
            return Err(SimError::new(
                SimErrorKind::BadArgument,
                Default::default(),
                format!(
                    "parameter `{}` ({} × {}) needs {want} bytes, got {}",
                    b.name,
                    b.elems,
                    b.dtype,
                    params[i].len()
                ),
            ));
        }
    }
    for (i, b) in k.bufs.iter().enumerate() {
        if b.space == Space::Global && !k.params.contains(&tirx_ir::lir::LBufId(i as u32)) {
            return Err(invalid(format!("global buffer `{}` is not a kernel parameter", b.name)));
        }
        let bytes = byte_size(b);
        if b.space == Space::Local && bytes > LOCAL_LIMIT {
            return Err(limit_error(format!(
                "local buffer `{}` takes {bytes} bytes per thread; CUDA allows at most {LOCAL_LIMIT}",
                b.name
            )));
        }
    }
    // Placed as the CUDA generator lays the arrays out (and lowering checks them).
    let shared = k.shared_layout(|_| true);
    if shared.static_bytes > STATIC_SMEM_LIMIT {
        return Err(limit_error(format!(
            "{} bytes of static shared memory; a kernel may declare at most {STATIC_SMEM_LIMIT} statically",
            shared.static_bytes
        ))
        .help("allocate large shared buffers with scope=\"shared.dyn\""));
    }
    if shared.total() > SMEM_LIMIT {
        return Err(limit_error(format!(
            "{} bytes of shared memory per CTA; sm_90 allows at most {SMEM_LIMIT}",
            shared.total()
        )));
    }
    crate::memory::check_memory(k, opts)?;
    Ok(())
}

/// The bytes of buffer `b` (per thread for local memory), saturated: a
/// malformed size must reach the limit checks, not overflow.
fn byte_size(b: &LBuf) -> usize {
    (b.elems.max(0) as usize).saturating_mul(b.dtype.bytes() as usize)
}

impl<'a> Machine<'a> {
    /// Allocates every buffer (fallibly: `check_launch` budgeted them first).
    fn new(
        k: &'a LKernel,
        prog: &'a Program,
        opts: &'a SimOptions,
        params: &mut [Vec<u8>],
        own: &dyn Fn(&tirx_ir::lir::LBufId) -> bool,
    ) -> Result<Machine<'a>, SimError> {
        use crate::memory::try_zeroed;
        let n = k.threads_per_cta() as usize;
        let mut bufs = Vec::with_capacity(k.bufs.len());
        let mut smem_top = 0u32;
        for b in &k.bufs {
            let esize = b.dtype.bytes() as usize;
            let elems = b.elems.max(0) as usize;
            let what = || format!("buffer `{}`", b.name);
            let (data, shadow, init, smem_base) = match b.space {
                Space::Global => {
                    let shadow = if opts.check_races { try_zeroed(elems, &what)? } else { vec![] };
                    (vec![], shadow, vec![], 0)
                }
                Space::Shared => {
                    let base = smem_top;
                    let bytes = elems.saturating_mul(esize);
                    let padded = bytes.checked_next_multiple_of(128).and_then(|p| u32::try_from(p).ok());
                    smem_top = smem_top.saturating_add(padded.unwrap_or(u32::MAX));
                    (try_zeroed(bytes, &what)?, try_zeroed(elems, &what)?, vec![], base)
                }
                Space::Local => {
                    let slots = n.saturating_mul(elems);
                    (try_zeroed(slots.saturating_mul(esize), &what)?, vec![], try_zeroed(slots, &what)?, 0)
                }
            };
            bufs.push(BufMem {
                name: b.name.clone(),
                space: b.space,
                dtype: b.dtype,
                esize,
                elems,
                data,
                shadow,
                init,
                smem_base,
                leaders: Default::default(),
                warps: Default::default(),
                peer_reads: Default::default(),
            });
        }
        for (i, id) in k.params.iter().enumerate() {
            if own(id) {
                bufs[id.0 as usize].data = std::mem::take(&mut params[i]);
            }
        }
        // (a CTA numbers at most as many barrier slots as its shared 8-byte elements)
        let barrier_slots =
            bufs.iter().filter(|b| b.space == Space::Shared && b.esize == 8).map(|b| b.data.len() / 8).sum();
        Ok(Machine {
            k,
            prog,
            opts,
            bufs,
            n,
            barrier_slots,
            regs: try_zeroed(n.saturating_mul(prog.nregs), &|| "registers".to_string())?,
            pcs: vec![0; n],
            state: vec![State::Runnable; n],
            cta: [0; 3],
            clock: 0,
            cta_start: 0,
            cta_sync: 0,
            wsync: vec![0; n.div_ceil(32)],
            cta_starts: vec![],
            warnings: vec![],
            warn_at: HashMap::new(),
            warn_same_at: HashMap::new(),
            bank: opts.stats.then(BankCollector::default),
            fam: FamilyState::new(k, n),
            insts: 0,
            ctxs: vec![],
            rank: 0,
            cluster_phase: 0,
            cluster_min_arrive: [0; 3],
            peer_copies: vec![],
            peer_arrives: vec![],
            group_words: HashMap::new(),
            printed: vec![],
            releases: HashMap::new(),
            order_rng: opts.warp_order_seed.map_or(0, |s| s | 1),
        })
    }

    /// Runs the clusters in launch order (x fastest; a CTA is a cluster of one), each
    /// cluster's CTAs together; returns how many CTAs ran (`grid_limit` rounded up to
    /// whole clusters).
    fn run_grid(&mut self) -> Result<u64, SimError> {
        if self.k.cooperative() {
            return self.run_cooperative();
        }
        let c = self.k.cluster.map(|d| d.max(1));
        let size = self.cluster_size();
        if size > 1 {
            self.ctxs = (0..size).map(|_| self.fresh_ctx()).collect::<Result<_, _>>()?;
        }
        let [gx, gy, gz] = [0, 1, 2].map(|d| (self.k.grid[d] / c[d]).max(1) as u64);
        let total = gx.saturating_mul(gy).saturating_mul(gz);
        let limit = self.opts.grid_limit.map(|l| l.div_ceil(size as u64));
        let count = limit.map_or(total, |l| l.min(total));
        for i in 0..count {
            let cl = [(i % gx) as u32, ((i / gx) % gy) as u32, (i / (gx * gy)) as u32];
            let ctas: Vec<[u32; 3]> = (0..size as u32)
                .map(|r| {
                    let rank = [r % c[0], (r / c[0]) % c[1], r / (c[0] * c[1])];
                    [0, 1, 2].map(|d| cl[d] * c[d] + rank[d])
                })
                .collect();
            self.run_cluster(&ctas)?;
        }
        Ok(count * size as u64)
    }

    /// A cooperative grid (`grid_group`): every CTA resident at once, so all run together, in
    /// launch order (x fastest); `grid_limit` cannot cut it.
    fn run_cooperative(&mut self) -> Result<u64, SimError> {
        let [gx, gy, gz] = self.k.grid.map(|d| d.max(1));
        let total = u64::from(gx) * u64::from(gy) * u64::from(gz);
        if let Some(l) = self.opts.grid_limit.filter(|&l| l < total) {
            return Err(limit_error(format!(
                "a cooperative grid (its CTAs meet at grid group barriers) runs whole: --grid-limit {l} is below its {total} CTAs"
            )));
        }
        let ctas: Vec<[u32; 3]> = (0..total)
            .map(|i| {
                [
                    (i % u64::from(gx)) as u32,
                    ((i / u64::from(gx)) % u64::from(gy)) as u32,
                    (i / (u64::from(gx) * u64::from(gy))) as u32,
                ]
            })
            .collect();
        self.ctxs = (0..ctas.len()).map(|_| self.fresh_ctx()).collect::<Result<_, _>>()?;
        self.run_cluster(&ctas)?;
        Ok(total)
    }

    /// The next tick of the clock. In a cluster each CTA's ticks are its rank modulo the
    /// cluster size, so an access's stamp names its CTA (`Machine::foreign`).
    pub(crate) fn tick(&mut self) -> Result<u32, SimError> {
        let size = self.ctxs.len().max(1) as u32;
        if self.clock >= u32::MAX - size {
            return Err(limit_error(
                "the simulation passed 4 billion barriers; simulate fewer CTAs (--grid-limit)".into(),
            ));
        }
        let next = self.clock + 1;
        self.clock = next + (self.rank as u32 + size - next % size) % size;
        Ok(self.clock)
    }

    /// Runs the CTAs of one cluster (rank order) until every thread exited.
    fn run_cluster(&mut self, ctas: &[[u32; 3]]) -> Result<(), SimError> {
        self.cluster_phase = 0;
        self.cluster_min_arrive = [0; 3];
        self.peer_copies.clear();
        self.peer_arrives.clear();
        for (r, &cta) in ctas.iter().enumerate() {
            self.switch_to(r);
            self.start_cta(cta)?;
        }
        // The CTAs run together: each one's accesses are fresh from the cluster's start.
        self.switch_to(0);
        let start = self.cta_start;
        for r in 1..ctas.len() {
            self.switch_to(r);
            self.cta_start = start;
        }
        loop {
            let mut progressed = false;
            for r in 0..ctas.len() {
                self.switch_to(r);
                progressed |= self.run_slice()?;
            }
            let mut done = true;
            for r in 0..ctas.len() {
                self.switch_to(r);
                done &= self.state.iter().all(|s| *s == State::Exited);
            }
            if done {
                break;
            }
            if self.release_cluster_barrier()? || progressed {
                continue;
            }
            let stuck = (0..ctas.len()).find(|&r| {
                self.switch_to(r);
                self.state.iter().any(|s| *s != State::Exited)
            });
            self.switch_to(stuck.unwrap_or(0));
            return Err(self.diagnose_hang());
        }
        for r in 0..ctas.len() {
            self.switch_to(r);
            self.end_cta()?;
        }
        self.switch_to(0);
        match self.peer_copies_settled().or_else(|| self.peer_arrives_settled()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs the running CTA's threads until none can run; returns whether anything ran or passed.
    fn run_slice(&mut self) -> Result<bool, SimError> {
        let mut any = false;
        loop {
            for w in self.warp_order() {
                for t in w * 32..(w * 32 + 32).min(self.n) {
                    if self.state[t] == State::Runnable {
                        self.run_thread(t)?;
                        any = true;
                    }
                }
            }
            if self.state.iter().all(|s| *s == State::Exited) {
                return Ok(any);
            }
            if self.release_warps()? || self.release_cta_barrier()? || self.release_family_waits()? {
                any = true;
                continue;
            }
            return Ok(any);
        }
    }

    /// The warps in the order this round runs them: ascending, or a fresh pseudo-random
    /// permutation (xorshift64*, Fisher–Yates) under [`SimOptions::warp_order_seed`].
    fn warp_order(&mut self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.n.div_ceil(32)).collect();
        if self.opts.warp_order_seed.is_some() {
            for i in (1..order.len()).rev() {
                self.order_rng ^= self.order_rng >> 12;
                self.order_rng ^= self.order_rng << 25;
                self.order_rng ^= self.order_rng >> 27;
                let r = self.order_rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                order.swap(i, (r % (i as u64 + 1)) as usize);
            }
        }
        order
    }

    fn start_cta(&mut self, cta: [u32; 3]) -> Result<(), SimError> {
        self.cta = cta;
        let now = self.tick()?;
        self.cta_start = now;
        self.cta_sync = now;
        self.wsync.iter_mut().for_each(|w| *w = now);
        self.cta_starts.push((now, cta));
        self.reset_cta_memory();
        self.fam.reset();
        self.init_threads();
        Ok(())
    }

    /// After every thread of the CTA exited: copies never landed, register and bank checks.
    fn end_cta(&mut self) -> Result<(), SimError> {
        self.family_end_cta()?;
        if let Some(b) = &mut self.bank {
            b.flush_cta();
        }
        Ok(())
    }

    /// Fresh shared and local memory for a new CTA (zeroed, so results are deterministic).
    fn reset_cta_memory(&mut self) {
        for b in &mut self.bufs {
            if b.space != Space::Global {
                b.data.fill(0);
            }
        }
    }

    fn init_threads(&mut self) {
        let nr = self.prog.nregs;
        let [bx, by, _] = self.k.block;
        for t in 0..self.n {
            let regs = &mut self.regs[t * nr..(t + 1) * nr];
            regs.copy_from_slice(&self.prog.template);
            let t32 = t as u32;
            regs[0] = (t32 % bx) as u64;
            regs[1] = ((t32 / bx) % by) as u64;
            regs[2] = (t32 / (bx * by)) as u64;
            for d in 0..3 {
                regs[3 + d] = self.cta[d] as u64;
            }
        }
        self.pcs.fill(0);
        self.state.fill(State::Runnable);
    }

    /// Runs thread `t` until it blocks or exits.
    fn run_thread(&mut self, t: usize) -> Result<(), SimError> {
        let prog = self.prog;
        let code = &prog.code[..];
        let base = t * prog.nregs;
        let tid = t as u32;
        let mut pc = self.pcs[t] as usize;
        let mut steps = 0u64;
        macro_rules! reg {
            ($r:expr) => {
                self.regs[base + $r as usize]
            };
        }
        let result = loop {
            steps += 1;
            match &code[pc] {
                Ins::Mov { dst, src } => reg!(*dst) = reg!(*src),
                Ins::Bin { op, ty, dst, a, b, site } => {
                    let (x, y) = (reg!(*a), reg!(*b));
                    let fast = if *ty == DType::I32 { arith::bin_i32_fast(*op, x, y) } else { None };
                    match fast.map_or_else(|| arith::bin(*op, *ty, x, y), Ok) {
                        Ok(v) => reg!(*dst) = v,
                        Err(ArithFault::DivByZero) => break Err(self.div_by_zero(tid, *site)),
                    }
                }
                Ins::Un { op, ty, dst, a } => reg!(*dst) = arith::un(*op, *ty, reg!(*a)),
                Ins::Cast { from, to, dst, a } => reg!(*dst) = arith::cast(*from, *to, reg!(*a)),
                Ins::Math { f, ty, dst, a } => reg!(*dst) = arith::math(*f, *ty, reg!(*a)),
                Ins::Rounded { op, mode, ty, dst, args } => {
                    let [a, b, c] = args.map(|r| f64::from_bits(reg!(r)));
                    reg!(*dst) = round::rounded(*op, *mode, *ty, a, b, c).to_bits()
                }
                Ins::Load { site, buf, dst, idx } => match self.load(*buf, tid, reg!(*idx) as i64, *site) {
                    Ok(v) => reg!(*dst) = v,
                    Err(e) => break Err(e),
                },
                Ins::Store { site, buf, idx, val } => {
                    let (i, v) = (reg!(*idx) as i64, reg!(*val));
                    if let Err(e) = self.store(*buf, tid, i, v, *site) {
                        break Err(e);
                    }
                }
                Ins::VecCopy { site, dst, dst_idx, src, src_idx, lanes, nc } => {
                    let (di, si) = (reg!(*dst_idx) as i64, reg!(*src_idx) as i64);
                    let read = if *nc { Dir::ReadNc } else { Dir::Read };
                    if let Err(e) = self.vec_copy(tid, *dst, di, *src, si, *lanes as usize, read, *site) {
                        break Err(e);
                    }
                }
                Ins::Jmp { to } => {
                    pc = *to as usize;
                    continue;
                }
                Ins::Jz { cond, to } => {
                    if reg!(*cond) == 0 {
                        pc = *to as usize;
                        continue;
                    }
                }
                Ins::Jnz { cond, to } => {
                    if reg!(*cond) != 0 {
                        pc = *to as usize;
                        continue;
                    }
                }
                Ins::LoopTest { var, end, exit } => {
                    if (reg!(*var) as i64) >= (reg!(*end) as i64) {
                        pc = *exit as usize;
                        continue;
                    }
                }
                Ins::WhileTrip { trips, site } => {
                    let n = reg!(*trips) + 1;
                    if n > MAX_WHILE_TRIPS {
                        break Err(self.runaway(tid, *site));
                    }
                    reg!(*trips) = n;
                }
                Ins::Atomic { site, buf, idx, val, old } => {
                    let (i, v) = (reg!(*idx) as i64, reg!(*val));
                    match self.atomic_add(*buf, tid, i, v, *site) {
                        Ok(prev) => {
                            if let Some(o) = old {
                                reg!(*o) = prev;
                            }
                        }
                        Err(e) => break Err(e),
                    }
                }
                Ins::Inc { var, ty } => {
                    reg!(*var) = crate::value::wrap_int(*ty, (reg!(*var) as i64).wrapping_add(1)) as u64
                }
                Ins::Family(i) => {
                    self.pcs[t] = pc as u32; // (a family's step may ask which instruction it runs)
                    match i.step(self, tid, base) {
                        Ok(Flow::Next) => {}
                        Ok(Flow::Block) => {
                            self.state[t] = State::Waiting;
                            break Ok(());
                        }
                        Err(e) => break Err(e),
                    }
                }
                Ins::CtaBarrier { .. } => {
                    self.state[t] = State::Waiting;
                    break Ok(());
                }
                Ins::Exit => {
                    self.state[t] = State::Exited;
                    break self.family_exit(tid);
                }
            }
            pc += 1;
        };
        self.pcs[t] = pc as u32;
        self.insts += steps;
        result
    }

    /// `buf[idx] += v` as one atomic access; the value before.
    fn atomic_add(&mut self, b: u32, t: u32, idx: i64, v: u64, site: u32) -> Result<u64, SimError> {
        let e = self.bounds(b, t, idx, 1, site, "atomic")?;
        self.touch(b, t, e, Dir::Atomic, site)?;
        if self.opts.check_races && self.bufs[b as usize].space == Space::Global {
            self.atomic_sequence(b, e, t);
        }
        let (esize, dtype) = (self.bufs[b as usize].esize, self.bufs[b as usize].dtype);
        let off = self.byte_off(b, t, e);
        let old = decode(dtype, &self.bufs[b as usize].data[off..off + esize]);
        let mut new = [0u8; 8];
        encode(dtype, crate::value::add_elem(dtype, old, v), &mut new[..esize]);
        self.bufs[b as usize].data[off..off + esize].copy_from_slice(&new[..esize]);
        Ok(old)
    }

    /// A `while` loop past [`MAX_WHILE_TRIPS`] trips.
    fn runaway(&self, t: u32, site: u32) -> SimError {
        SimError::new(
            SimErrorKind::Deadlock,
            self.prog.sites[site as usize],
            format!("this `while` loop ran {MAX_WHILE_TRIPS} trips in {} without ending", self.who(t)),
        )
        .help("the simulator runs each thread until it blocks, so a loop that waits for another thread's store or atomic never ends here (nor reliably on a GPU): wait at a barrier or an mbarrier instead")
    }

    fn div_by_zero(&self, t: u32, site: u32) -> SimError {
        SimError::new(
            SimErrorKind::DivisionByZero,
            self.prog.sites[site as usize],
            format!("integer division or remainder by zero in {}", self.who(t)),
        )
    }

    pub(crate) fn bank_record(&mut self, b: u32, kind: &'static str, t: u32, e: usize, width: usize, site: u32) {
        if let Some(bank) = &mut self.bank {
            let buf = &self.bufs[b as usize];
            if buf.space == Space::Shared {
                let addr = buf.smem_base + (e * buf.esize) as u32;
                bank.record(PointKey { span: self.prog.sites[site as usize], buf: b, kind }, t, addr, width as u32);
            }
        }
    }

    fn load(&mut self, b: u32, t: u32, idx: i64, site: u32) -> Result<u64, SimError> {
        let e = self.bounds(b, t, idx, 1, site, "load")?;
        self.touch(b, t, e, Dir::Read, site)?;
        let buf = &self.bufs[b as usize];
        let esize = buf.esize;
        self.bank_record(b, "load", t, e, esize, site);
        let off = self.byte_off(b, t, e);
        let buf = &self.bufs[b as usize];
        Ok(decode(buf.dtype, &buf.data[off..off + esize]))
    }

    fn store(&mut self, b: u32, t: u32, idx: i64, v: u64, site: u32) -> Result<(), SimError> {
        let e = self.bounds(b, t, idx, 1, site, "store")?;
        let esize = self.bufs[b as usize].esize;
        let off = self.byte_off(b, t, e);
        let mut new = [0u8; 8];
        encode(self.bufs[b as usize].dtype, v, &mut new[..esize]);
        let dir = Dir::write_of(&self.bufs[b as usize].data[off..off + esize], &new[..esize]);
        self.touch(b, t, e, dir, site)?;
        self.bank_record(b, "store", t, e, esize, site);
        self.bufs[b as usize].data[off..off + esize].copy_from_slice(&new[..esize]);
        Ok(())
    }

    /// Reads `n` elements starting at `e` as raw bytes into `out` (after bounds checks).
    pub(crate) fn read_raw(
        &mut self,
        b: u32,
        t: u32,
        e: usize,
        n: usize,
        site: u32,
        out: &mut [u8],
    ) -> Result<(), SimError> {
        self.read_raw_via(b, t, e, n, Dir::Read, site, out)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_raw_via(
        &mut self,
        b: u32,
        t: u32,
        e: usize,
        n: usize,
        dir: Dir,
        site: u32,
        out: &mut [u8],
    ) -> Result<(), SimError> {
        for i in 0..n {
            self.touch(b, t, e + i, dir, site)?;
        }
        let off = self.byte_off(b, t, e);
        out.copy_from_slice(&self.bufs[b as usize].data[off..off + out.len()]);
        Ok(())
    }

    pub(crate) fn write_raw(
        &mut self,
        b: u32,
        t: u32,
        e: usize,
        n: usize,
        site: u32,
        bytes: &[u8],
    ) -> Result<(), SimError> {
        let off = self.byte_off(b, t, e);
        let esize = self.bufs[b as usize].esize;
        for i in 0..n {
            let (lo, hi) = (i * esize, (i + 1) * esize);
            let dir = Dir::write_of(&self.bufs[b as usize].data[off + lo..off + hi], &bytes[lo..hi]);
            self.touch(b, t, e + i, dir, site)?;
        }
        self.bufs[b as usize].data[off..off + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn vec_copy(
        &mut self,
        t: u32,
        dst: u32,
        di: i64,
        src: u32,
        si: i64,
        lanes: usize,
        read: Dir,
        site: u32,
    ) -> Result<(), SimError> {
        let width = lanes * self.bufs[src as usize].esize;
        let s = self.bounds(src, t, si, lanes, site, "vector load")?;
        self.aligned(src, t, s, width, site, "vector load")?;
        let d = self.bounds(dst, t, di, lanes, site, "vector store")?;
        self.aligned(dst, t, d, width, site, "vector store")?;
        // The widest access: a 256-bit PTX vector.
        let mut tmp = [0u8; 32];
        self.read_raw_via(src, t, s, lanes, read, site, &mut tmp[..width])?;
        self.bank_record(src, "load", t, s, width, site);
        self.write_raw(dst, t, d, lanes, site, &tmp[..width])?;
        self.bank_record(dst, "store", t, d, width, site);
        Ok(())
    }

    pub(crate) fn lanes(&self, w: usize) -> std::ops::Range<usize> {
        w * 32..(w * 32 + 32).min(self.n)
    }

    /// Who executes the instruction at `pc` together, if it is a family's.
    fn group(&self, pc: u32) -> Option<Group> {
        match &self.prog.code[pc as usize] {
            Ins::Family(i) => Some(i.group()),
            _ => None,
        }
    }

    /// Whether the instruction at `pc` is executed by a warp (or a warpgroup) together.
    fn is_warp_level(&self, pc: u32) -> bool {
        self.group(pc).is_some_and(|g| g != Group::Thread)
    }

    /// The threads around warp `w` that execute the warp-level instruction at `pc`
    /// together: the lanes of its member mask, or its warpgroup.
    fn members(&self, w: usize, pc: u32) -> Vec<usize> {
        let lanes = self.lanes(w);
        match self.group(pc) {
            Some(Group::Warp(mask)) => lanes.filter(|t| mask >> (t % 32) & 1 == 1).collect(),
            Some(Group::Warpgroup) => self.wg_threads(w / 4).collect(),
            _ => lanes.collect(),
        }
    }

    /// The warp-level instructions some lane of warp `w` waits at.
    fn warp_level_pcs(&self, w: usize) -> Vec<u32> {
        let mut pcs: Vec<u32> = self
            .lanes(w)
            .filter(|&t| self.state[t] == State::Waiting && self.is_warp_level(self.pcs[t]))
            .map(|t| self.pcs[t])
            .collect();
        pcs.sort_unstable();
        pcs.dedup();
        pcs
    }

    /// Executes every warp-level instruction that all its lanes wait at.
    fn release_warps(&mut self) -> Result<bool, SimError> {
        let mut progressed = false;
        for w in 0..self.wsync.len() {
            for pc in self.warp_level_pcs(w) {
                let members = self.members(w, pc);
                if !members.iter().all(|&t| self.state[t] == State::Waiting && self.pcs[t] == pc) {
                    continue;
                }
                self.warp_execute(w, pc)?;
                for t in members {
                    self.state[t] = State::Runnable;
                    self.pcs[t] = pc + 1;
                }
                progressed = true;
            }
        }
        Ok(progressed)
    }

    fn warp_execute(&mut self, w: usize, pc: u32) -> Result<(), SimError> {
        let prog = self.prog;
        match &prog.code[pc as usize] {
            Ins::Family(i) => i.execute(self, w),
            _ => Ok(()),
        }
    }

    fn release_cta_barrier(&mut self) -> Result<bool, SimError> {
        let pc = self.pcs[0];
        let at_barrier = matches!(self.prog.code[pc as usize], Ins::CtaBarrier { .. });
        if !at_barrier || !(0..self.n).all(|t| self.state[t] == State::Waiting && self.pcs[t] == pc) {
            return Ok(false);
        }
        let now = self.tick()?;
        self.cta_sync = now;
        self.wsync.iter_mut().for_each(|w| *w = now);
        self.fam.asy.cta_sync();
        self.state.fill(State::Runnable);
        self.pcs.fill(pc + 1);
        Ok(true)
    }

    pub(crate) fn site_of(&self, pc: u32) -> tirx_ir::Span {
        let site = match &self.prog.code[pc as usize] {
            Ins::CtaBarrier { site } => Some(*site),
            Ins::Family(i) => i.site(),
            _ => None,
        };
        site.map_or_else(Default::default, |s| self.prog.sites[s as usize])
    }

    fn ins_name(&self, pc: u32) -> String {
        match &self.prog.code[pc as usize] {
            Ins::CtaBarrier { .. } => "`__syncthreads()` (cta_sync)".into(),
            Ins::Family(i) => i.name(),
            _ => "an instruction".into(),
        }
    }

    /// Describes where the threads of `ids` that are not at `pc` are: exited, or waiting elsewhere.
    pub(crate) fn whereabouts(
        &self,
        ids: impl Iterator<Item = usize>,
        pc: u32,
        unit: &str,
        err: &mut SimError,
    ) -> String {
        let (mut exited, mut elsewhere): (Vec<u32>, HashMap<u32, Vec<u32>>) = (vec![], HashMap::new());
        let name = |t: usize| if unit == "lanes" { (t % 32) as u32 } else { t as u32 };
        for t in ids {
            match self.state[t] {
                State::Exited => exited.push(name(t)),
                _ if self.pcs[t] != pc => elsewhere.entry(self.pcs[t]).or_default().push(name(t)),
                _ => {}
            }
        }
        let mut parts = vec![];
        if !exited.is_empty() {
            parts.push(format!("{unit} {} exited without reaching it", ranges(&exited)));
        }
        let mut other: Vec<_> = elsewhere.into_iter().collect();
        other.sort();
        for (opc, ids) in other {
            parts.push(format!("{unit} {} wait at {} instead", ranges(&ids), self.ins_name(opc)));
            err.labels.push((self.site_of(opc), format!("{unit} {} wait here", ranges(&ids))));
        }
        parts.join("; ")
    }

    /// No thread can run and no barrier can be passed: explain the hang — a
    /// warp-level instruction missing lanes, then threads blocked on mbarriers,
    /// then a CTA barrier not reached by every thread.
    fn diagnose_hang(&self) -> SimError {
        if let Some(e) = (0..self.wsync.len()).find_map(|w| self.diagnose_warp(w)) {
            return e;
        }
        if let Some(e) = self.diagnose_family_hang() {
            return e;
        }
        let t0 = (0..self.n).find(|t| self.state[*t] == State::Waiting).unwrap_or(0);
        let pc = self.pcs[t0];
        let arrived: Vec<u32> =
            (0..self.n).filter(|t| self.state[*t] == State::Waiting && self.pcs[*t] == pc).map(|t| t as u32).collect();
        let mut err = SimError::new(SimErrorKind::BarrierDivergence, self.site_of(pc), String::new()).help(
            "every thread of the CTA must execute the same `T.cuda.cta_sync()`; move it out of thread-dependent `if`s and loops",
        );
        let rest = self.whereabouts(0..self.n, pc, "threads", &mut err);
        err.message = format!(
            "{} is not reached by every thread of CTA ({}, {}, {}): threads {} wait here; {rest}",
            self.ins_name(pc),
            self.cta[0],
            self.cta[1],
            self.cta[2],
            ranges(&arrived)
        );
        err
    }

    /// A warp-level instruction of warp `w` that some of its lanes wait at and others never reach.
    fn diagnose_warp(&self, w: usize) -> Option<SimError> {
        let pc = *self.warp_level_pcs(w).first()?;
        let members = self.members(w, pc);
        // Warpgroup instructions name threads of the CTA, warp ones lanes of the warp.
        let wg = self.group(pc) == Some(Group::Warpgroup);
        let (unit, group) =
            if wg { ("threads", format!("warpgroup {}", w / 4)) } else { ("lanes", format!("warp {w}")) };
        let arrived: Vec<u32> = members
            .iter()
            .filter(|&&t| self.state[t] == State::Waiting && self.pcs[t] == pc)
            .map(|&t| if wg { t as u32 } else { (t % 32) as u32 })
            .collect();
        let Ins::Family(i) = &self.prog.code[pc as usize] else { return None };
        let Divergence { kind, scope, help } = i.divergence();
        let mut err = SimError::new(kind, self.site_of(pc), String::new()).help(help);
        let rest = self.whereabouts(members.into_iter(), pc, unit, &mut err);
        err.message = format!(
            "{} is not reached by {scope} in {group} of CTA ({}, {}, {}): {unit} {} wait here; {rest}",
            self.ins_name(pc),
            self.cta[0],
            self.cta[1],
            self.cta[2],
            ranges(&arrived)
        );
        Some(err)
    }
}
