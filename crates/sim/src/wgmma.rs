//! Simulator of the **matrix** family, part 2 (`docs/lir.md` §2.11): Hopper's
//! `wgmma.mma_async` with its asynchrony, `wgmma.fence` / `commit_group` /
//! `wait_group`, `setmaxnreg`, and the async-proxy fence the wgmma's shared
//! reads need.
//!
//! All are warpgroup instructions: when the 128 threads of a warpgroup wait at
//! one, the warpgroup executes it (their `FamilyIns::execute`); a warpgroup
//! the CTA has only in part, or whose threads wait at different instructions,
//! is an error.
//!
//! *The wgmma* reads A and B when issued — every element through its
//! descriptor, as the hardware addresses it ([`SmemDesc::offset`],
//! [`WgmmaSwizzle::apply`]) — computes `D = A·B (+ D)` (products exact, the
//! exact sum rounded once to the accumulator type, `dot`), and writes the
//! registers. But the registers are *pending* until a `wgmma.wait_group`
//! completes the group holding the wgmma: any other access to them before that
//! is an error naming the wgmma and the access (a later wgmma of the same shape
//! may accumulate into them: the hardware orders those). The shared elements it
//! read must not be written before that wait either (by any thread), and the
//! wait re-reads them in the race shadow, so a writer must also be ordered
//! after the wait (a barrier). A thread that exits with wgmmas not waited for
//! is an error.
//!
//! *Fences*: a register a thread accessed since its warpgroup's last
//! `wgmma.fence` may not be an operand of a wgmma (nor may any wgmma precede
//! the warpgroup's first fence). Shared memory a wgmma reads goes through the
//! async proxy: the last generic write of each element must be followed by a
//! `fence.proxy.async` of the writing thread that is ordered before the wgmma
//! (the fence, then a barrier); cp.async landings are generic writes.
//!
//! The race shadow sees the wgmma's shared reads as reads by the warpgroup's
//! first thread, at issue and again at the wait.

use crate::asynch::WGMMA_READER;
use crate::compile::{Compiler, Reg};
use crate::dot;
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::family::{Divergence, FamilyIns, Group};
use crate::memory::Dir;
use crate::value::{decode, encode};
use std::collections::VecDeque;
use tirx_ir::lir::wgmma::{Major, SmemDesc, Wgmma, WgmmaA, WgmmaIn, WgmmaKind, WgmmaSwizzle, WgmmaSync, WARPGROUP};
use tirx_ir::lir::{LExpr, LKernel, LStmt, LStmtKind, MatrixOp, Space};
use tirx_ir::DType;

/// A descriptor operand: its buffer, the start element register and the fixed fields.
#[derive(Clone, Debug)]
pub(crate) struct DescIns {
    pub buf: u32,
    pub idx: Reg,
    pub major: Major,
    pub swizzle: WgmmaSwizzle,
    pub lbo: i64,
    pub sbo: i64,
}

#[derive(Clone, Debug)]
pub(crate) enum AIns {
    Smem(DescIns),
    Regs { buf: u32, regs: Vec<i64> },
}

#[derive(Clone, Debug)]
pub(crate) struct WgmmaIns {
    pub site: u32,
    pub kind: WgmmaKind,
    pub d: u32,
    pub d_regs: Vec<i64>,
    pub a: AIns,
    pub b: DescIns,
    pub scale_d: Reg,
}

/// The warpgroup of warp `w`.
fn warpgroup_of(w: usize) -> usize {
    w * 32 / WARPGROUP as usize
}

/// How threads of a warpgroup that exit or wait elsewhere are reported, for every
/// warpgroup instruction.
const WARPGROUP_DIVERGENCE: Divergence = Divergence {
    kind: SimErrorKind::PartialWarp,
    scope: "every thread of its warpgroup",
    help: "wgmma, its fence/commit/wait and setmaxnreg are warpgroup-collective (`.sync.aligned`): all 128 threads of the warpgroup must execute the same instruction; guard them only with conditions a warpgroup agrees on (`if wg_id == 1:`)",
};

impl FamilyIns for WgmmaIns {
    fn name(&self) -> String {
        format!("`wgmma.mma_async.{}`", self.kind.ptx())
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        Group::Warpgroup
    }

    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        let g = warpgroup_of(w);
        m.whole_warpgroup(g, self.site, "wgmma.mma_async")?;
        m.wgmma_issue(g, self)
    }

    fn divergence(&self) -> Divergence {
        WARPGROUP_DIVERGENCE
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        if let AIns::Smem(d) = &mut self.a {
            f(&mut d.idx);
        }
        f(&mut self.b.idx);
        f(&mut self.scale_d);
    }
}

/// A warpgroup instruction other than the wgmma itself.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WgOp {
    Sync(WgmmaSync),
    SetMaxNReg { inc: bool, regs: u32 },
}

/// `wgmma.fence` / `commit_group` / `wait_group` (matrix family), `setmaxnreg`
/// (synchronisation family): executed by a whole warpgroup.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WgOpIns {
    pub site: u32,
    pub op: WgOp,
}

impl FamilyIns for WgOpIns {
    fn name(&self) -> String {
        match self.op {
            WgOp::Sync(WgmmaSync::Wait(n)) => format!("`wgmma.wait_group {n}`"),
            WgOp::Sync(s) => format!("`{}`", s.name()),
            WgOp::SetMaxNReg { inc, regs } => format!("`setmaxnreg.{} {regs}`", if inc { "inc" } else { "dec" }),
        }
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        Group::Warpgroup
    }

    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        let g = warpgroup_of(w);
        m.whole_warpgroup(g, self.site, &self.name())?;
        match self.op {
            WgOp::Sync(s) => m.wgmma_sync(g, s, self.site),
            WgOp::SetMaxNReg { inc, regs } => m.setmaxnreg(g, inc, regs, self.site),
        }
    }

    fn divergence(&self) -> Divergence {
        WARPGROUP_DIVERGENCE
    }

    fn for_each_reg(&mut self, _: &mut dyn FnMut(&mut Reg)) {}
}

/// Per-slot state of a local buffer some wgmma uses as registers.
struct LocalTrack {
    /// Per (thread, element): the record (1-based) whose wait defines it; 0: defined.
    pending: Vec<u32>,
    /// Per (thread, element): site + 1 of its last access since the warpgroup's last wgmma.fence; 0: none.
    dirty: Vec<u32>,
    elems: usize,
}

/// One issued wgmma.
struct Record {
    site: u32,
    wg: usize,
    n: u32,
    /// The register buffers and elements (of every thread) it leaves pending.
    regs: Vec<(u32, Vec<usize>)>,
    /// The shared elements it read.
    smem: Vec<(u32, usize)>,
}

#[derive(Default, Clone)]
struct WgProgress {
    fenced: bool,
    /// Records issued since the last commit (1-based ids).
    open: Vec<u32>,
    groups: VecDeque<Vec<u32>>,
    /// Every record of this warpgroup with an id up to this one has completed.
    done: u32,
}

/// The per-CTA state of wgmma.
pub(crate) struct WgState {
    /// Whether the kernel has any wgmma (the hooks are skipped otherwise).
    pub active: bool,
    nwg: usize,
    local: Vec<Option<LocalTrack>>,
    /// Per shared buffer a descriptor names: `elems × nwg` ids of the last record of each warpgroup that read it.
    smem: Vec<Option<Vec<u32>>>,
    wgs: Vec<WgProgress>,
    records: Vec<Record>,
    /// Per warpgroup: its register budget per thread and the `setmaxnreg` that set it.
    budget: Vec<(u32, Option<u32>)>,
    /// The budget every thread starts with: the register file over the CTA's threads.
    cap: u32,
}

/// Registers per SM, shared by the CTA's threads (`setmaxnreg` moves them between warpgroups).
const REGISTER_FILE: u32 = 65536;

/// The per-thread registers a CTA of `n` threads starts with when its kernel reallocates
/// registers: the register file over the threads (whole warps), in steps of 8, at most 255.
fn register_cap(n: usize) -> u32 {
    let threads = (n.div_ceil(32) * 32).max(32) as u32;
    (REGISTER_FILE / threads).min(255) / 8 * 8
}

impl WgState {
    pub(crate) fn new(k: &LKernel, n: usize) -> WgState {
        let nwg = n.div_ceil(WARPGROUP as usize);
        let mut local: Vec<Option<LocalTrack>> = k.bufs.iter().map(|_| None).collect();
        let mut smem: Vec<Option<Vec<u32>>> = k.bufs.iter().map(|_| None).collect();
        let mut active = false;
        walk(&k.body, &mut |w| {
            active = true;
            let regs = std::iter::once(w.d).chain(match &w.a {
                WgmmaA::Regs { buf, .. } => Some(*buf),
                WgmmaA::Smem(_) => None,
            });
            for b in regs {
                let elems = k.bufs.get(b.0 as usize).map_or(0, |x| x.elems.max(0) as usize);
                if let Some(slot @ None) = local.get_mut(b.0 as usize) {
                    *slot = Some(LocalTrack { pending: vec![0; n * elems], dirty: vec![0; n * elems], elems });
                }
            }
            let descs = [Some(&w.b), if let WgmmaA::Smem(s) = &w.a { Some(s) } else { None }];
            for s in descs.into_iter().flatten() {
                let elems = k.bufs.get(s.buf.0 as usize).map_or(0, |x| x.elems.max(0) as usize);
                if let Some(slot @ None) = smem.get_mut(s.buf.0 as usize) {
                    *slot = Some(vec![0; elems * nwg]);
                }
            }
        });
        WgState {
            active,
            nwg,
            local,
            smem,
            wgs: vec![WgProgress::default(); nwg],
            records: vec![],
            budget: vec![(register_cap(n), None); nwg],
            cap: register_cap(n),
        }
    }

    pub(crate) fn reset(&mut self) {
        for t in self.local.iter_mut().flatten() {
            t.pending.fill(0);
            t.dirty.fill(0);
        }
        for s in self.smem.iter_mut().flatten() {
            s.fill(0);
        }
        self.wgs.iter_mut().for_each(|w| *w = WgProgress::default());
        self.records.clear();
        let cap = self.cap;
        self.budget.iter_mut().for_each(|b| *b = (cap, None));
    }
}

fn walk(body: &[LStmt], f: &mut dyn FnMut(&Wgmma)) {
    for s in body {
        if let LStmtKind::Matrix(MatrixOp::Wgmma(w)) = &s.kind {
            f(w);
        }
        for b in s.kind.bodies() {
            walk(b, f);
        }
    }
}

impl Compiler<'_> {
    pub(crate) fn wgmma(&mut self, w: &Wgmma) -> Result<(), SimError> {
        let k = self.k;
        let kind =
            w.kind(&|b| k.bufs.get(b.0 as usize).map_or(DType::Bool, |x| x.dtype)).map_err(|e| self.invalid(e))?;
        let consts = |c: &Compiler, idx: &[LExpr]| -> Result<Vec<i64>, SimError> {
            idx.iter()
                .map(|e| match e {
                    LExpr::Int(v, _) => Ok(*v),
                    _ => Err(c.invalid("wgmma register indices must be constants")),
                })
                .collect()
        };
        let d = self.buf(w.d)?;
        let d_regs = consts(self, &w.d_index)?;
        let a = match &w.a {
            WgmmaA::Smem(s) => AIns::Smem(self.desc(s)?),
            WgmmaA::Regs { buf, index } => AIns::Regs { buf: self.buf(*buf)?, regs: consts(self, index)? },
        };
        let b = self.desc(&w.b)?;
        let scale_d = self.expr_as(&w.scale_d, DType::Bool)?;
        let site = self.site();
        self.emit_family(WgmmaIns { site, kind, d, d_regs, a, b, scale_d });
        Ok(())
    }

    fn desc(&mut self, s: &SmemDesc) -> Result<DescIns, SimError> {
        let buf = self.buf(s.buf)?;
        if self.k.bufs[buf as usize].space != Space::Shared {
            return Err(self.invalid("a wgmma descriptor names a buffer outside shared memory"));
        }
        let idx = self.index(&s.index)?;
        Ok(DescIns { buf, idx, major: s.major, swizzle: s.swizzle, lbo: i64::from(s.lbo), sbo: i64::from(s.sbo) })
    }
}

/// One multiplicand as a matrix of f64 values: `rows × cols`, row-major.
struct Mat {
    cols: usize,
    v: Vec<f64>,
}

impl Machine<'_> {
    /// The threads of warpgroup `g`.
    pub(crate) fn wg_threads(&self, g: usize) -> std::ops::Range<usize> {
        let w = WARPGROUP as usize;
        g * w..(g * w + w).min(self.n)
    }

    fn wg_error(&self, site: u32, msg: String) -> SimError {
        SimError::new(SimErrorKind::Wgmma, self.prog.sites[site as usize], msg)
    }

    /// Warpgroup `g`, whose threads all wait at warpgroup instruction `what`, is whole.
    fn whole_warpgroup(&self, g: usize, site: u32, what: &str) -> Result<(), SimError> {
        if self.wg_threads(g).len() != WARPGROUP as usize {
            return Err(SimError::new(
                SimErrorKind::PartialWarp,
                self.prog.sites[site as usize],
                format!(
                    "{what} executed by warpgroup {g}, which has only {} of 128 threads (the CTA has {} threads)",
                    self.wg_threads(g).len(),
                    self.n
                ),
            )
            .help("warpgroup instructions need whole warpgroups: make the CTA size a multiple of 128"));
        }
        Ok(())
    }

    /// `setmaxnreg`: `.inc` never lowers the warpgroup's budget, `.dec` never raises it
    /// (PTX leaves both undefined); the budgets are checked against the pool at the CTA's end.
    fn setmaxnreg(&mut self, g: usize, inc: bool, regs: u32, site: u32) -> Result<(), SimError> {
        let (now, _) = self.fam.wg.budget[g];
        if (inc && regs < now) || (!inc && regs > now) {
            let (op, rel) = if inc { ("inc", "below") } else { ("dec", "above") };
            return Err(self
                .wg_error(
                    site,
                    format!("setmaxnreg.{op} {regs} by warpgroup {g}, {rel} its current {now} registers per thread"),
                )
                .help(
                    "`.inc` raises the budget and `.dec` lowers it; a CTA starts at the register file over its threads",
                ));
        }
        self.fam.wg.budget[g] = (regs, Some(site));
        Ok(())
    }

    /// At the CTA's end: the warpgroups' budgets fit the pool they started with (else a
    /// `setmaxnreg.inc` waits for registers that are never released: a hang on the GPU).
    pub(crate) fn setmaxnreg_check(&self) -> Result<(), SimError> {
        let (cap, nwg) = (self.fam.wg.cap, self.fam.wg.nwg as u32);
        let total: u32 = self.fam.wg.budget.iter().map(|b| b.0).sum();
        let Some(site) = self.fam.wg.budget.iter().filter_map(|b| b.1).max() else { return Ok(()) };
        if total <= cap * nwg {
            return Ok(());
        }
        let each: Vec<String> = self.fam.wg.budget.iter().map(|b| b.0.to_string()).collect();
        Err(self
            .wg_error(
                site,
                format!(
                    "the warpgroups end with {total} registers per thread ({}), more than the {} the CTA has ({nwg} × {cap}: {REGISTER_FILE} registers over {} threads); a setmaxnreg.inc waits forever on a GPU",
                    each.join(" + "),
                    cap * nwg,
                    self.n
                ),
            )
            .help("balance the budgets: what the producer's setmaxnreg.dec releases is what the consumers' setmaxnreg.inc may take"))
    }

    fn wgmma_sync(&mut self, g: usize, s: WgmmaSync, site: u32) -> Result<(), SimError> {
        match s {
            WgmmaSync::Fence => {
                self.fam.wg.wgs[g].fenced = true;
                let ts = self.wg_threads(g);
                for tr in self.fam.wg.local.iter_mut().flatten() {
                    tr.dirty[ts.start * tr.elems..ts.end * tr.elems].fill(0);
                }
            }
            WgmmaSync::Commit => {
                let open = std::mem::take(&mut self.fam.wg.wgs[g].open);
                self.fam.wg.wgs[g].groups.push_back(open);
            }
            WgmmaSync::Wait(n) => {
                while self.fam.wg.wgs[g].groups.len() > n as usize {
                    let group = self.fam.wg.wgs[g].groups.pop_front().unwrap_or_default();
                    for id in group {
                        self.complete(id, site)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The wait that completes record `id`: its registers are defined, its shared reads end now.
    /// Its element lists are dropped here (only a pending record's are read again), so a
    /// persistent CTA's memory does not grow with the wgmmas it has issued.
    fn complete(&mut self, id: u32, site: u32) -> Result<(), SimError> {
        let rec = &mut self.fam.wg.records[id as usize - 1];
        let (g, smem, regs) = (rec.wg, std::mem::take(&mut rec.smem), std::mem::take(&mut rec.regs));
        self.fam.wg.wgs[g].done = self.fam.wg.wgs[g].done.max(id);
        let ts = self.wg_threads(g);
        for (b, elems) in regs {
            if let Some(tr) = self.fam.wg.local[b as usize].as_mut() {
                for t in ts.clone() {
                    for &e in &elems {
                        let slot = &mut tr.pending[t * tr.elems + e];
                        if *slot == id {
                            *slot = 0;
                        }
                    }
                }
            }
        }
        let reader = (g * WARPGROUP as usize) as u32;
        for (b, e) in smem {
            self.touch(b, reader, e, Dir::ReadWgmma, site)?;
        }
        Ok(())
    }

    /// Issues a wgmma for warpgroup `g`.
    fn wgmma_issue(&mut self, g: usize, w: &WgmmaIns) -> Result<(), SimError> {
        let kind = w.kind;
        let (n, k) = (kind.n as usize, kind.k() as usize);
        if !self.fam.wg.wgs[g].fenced {
            return Err(self
                .wg_error(w.site, format!("wgmma.mma_async by warpgroup {g} before any wgmma.fence"))
                .help("issue `wgmma.fence` before the first wgmma of a warpgroup (Tx.warpgroup.gemm_async does)"));
        }
        let ts = self.wg_threads(g);
        let d_elems: Vec<usize> = w.d_regs.iter().flat_map(|&r| r as usize..r as usize + kind.acc_per_reg()).collect();
        self.check_operand_regs(g, w, w.d, &d_elems, true)?;
        let a_elems: Vec<usize> = match &w.a {
            AIns::Regs { regs, .. } => regs.iter().flat_map(|&r| r as usize..r as usize + kind.a.per_reg()).collect(),
            AIns::Smem(_) => vec![],
        };
        if let AIns::Regs { buf, .. } = &w.a {
            self.check_operand_regs(g, w, *buf, &a_elems, false)?;
        }
        let mut smem = vec![];
        let a = match &w.a {
            AIns::Smem(s) => self.read_desc(g, w.site, s, (64, k), kind.a, &mut smem)?,
            AIns::Regs { buf, regs } => self.read_a_regs(g, w.site, kind, *buf, regs)?,
        };
        let b = self.read_desc(g, w.site, &w.b, (n, k), kind.b, &mut smem)?;
        let scale = self.wg_uniform(g, w.site, w.scale_d, "scale_d", |v| v != 0)?;
        self.write_d(g, w, &a, &b, scale)?;
        // Record it: registers pending, shared reads in flight.
        let id = self.fam.wg.records.len() as u32 + 1;
        let mut regs = vec![(w.d, d_elems.clone())];
        if let AIns::Regs { buf, .. } = &w.a {
            regs.push((*buf, a_elems.clone()));
        }
        for (b, elems) in &regs {
            if let Some(tr) = self.fam.wg.local[*b as usize].as_mut() {
                for t in ts.clone() {
                    for &e in elems {
                        tr.pending[t * tr.elems + e] = id;
                    }
                }
            }
        }
        let nwg = self.fam.wg.nwg;
        for &(b, e) in &smem {
            if let Some(rd) = self.fam.wg.smem[b as usize].as_mut() {
                rd[e * nwg + g] = id;
            }
        }
        self.fam.wg.records.push(Record { site: w.site, wg: g, n: kind.n, regs, smem });
        self.fam.wg.wgs[g].open.push(id);
        Ok(())
    }

    /// The D (`acc`) or A registers of a wgmma: not accessed since the last fence;
    /// a pending accumulator only from a wgmma of the same shape.
    fn check_operand_regs(&self, g: usize, w: &WgmmaIns, b: u32, elems: &[usize], acc: bool) -> Result<(), SimError> {
        let Some(tr) = self.fam.wg.local[b as usize].as_ref() else { return Ok(()) };
        let name = &self.bufs[b as usize].name;
        for t in self.wg_threads(g) {
            for &e in elems {
                let slot = t * tr.elems + e;
                if tr.dirty[slot] != 0 {
                    let at = self.prog.sites[(tr.dirty[slot] - 1) as usize];
                    return Err(self
                        .wg_error(
                            w.site,
                            format!(
                                "wgmma.mma_async uses register `{name}[{e}]` of {}, which was accessed after the warpgroup's last wgmma.fence",
                                self.who(t as u32)
                            ),
                        )
                        .label(at, "accessed here")
                        .help("put `wgmma.fence` between other accesses to a wgmma's registers and the wgmma"));
                }
                let p = tr.pending[slot];
                if p != 0 {
                    let rec = &self.fam.wg.records[p as usize - 1];
                    // Wgmmas may share A registers, and chain accumulators of one shape (the hardware orders those).
                    let was_acc = rec.regs.first().is_some_and(|(d, _)| *d == b);
                    let ok = if acc { was_acc && rec.n == w.kind.n } else { !was_acc };
                    if !ok {
                        let what = match (acc, was_acc) {
                            (true, true) => "an accumulator of a different shape",
                            (true, false) => "its A registers",
                            (false, _) => "its accumulator",
                        };
                        return Err(self
                            .wg_error(
                                w.site,
                                format!(
                                    "wgmma.mma_async uses register `{name}[{e}]` of {} while an earlier wgmma ({what}) that uses it has not been waited for",
                                    self.who(t as u32)
                                ),
                            )
                            .label(self.prog.sites[rec.site as usize], "the earlier wgmma")
                            .help("wait for it first: wgmma.commit_group, wgmma.wait_group"));
                    }
                }
            }
        }
        Ok(())
    }

    /// Every thread of warpgroup `g` evaluates register `reg` (a warpgroup-wide operand
    /// of a wgmma, `what`, seen through `key`): they must agree; the value they agree on.
    fn wg_uniform<T: PartialEq>(
        &self,
        g: usize,
        site: u32,
        reg: Reg,
        what: &str,
        key: impl Fn(u64) -> T,
    ) -> Result<T, SimError> {
        let ts = self.wg_threads(g);
        let at = |t: usize| key(self.regs[t * self.prog.nregs + reg as usize]);
        let first = at(ts.start);
        if let Some(t) = ts.clone().find(|&t| at(t) != first) {
            let msg = format!(
                "the threads of warpgroup {g} disagree on {what} of a wgmma (thread {t} differs from {})",
                ts.start
            );
            return Err(self.wg_error(site, msg));
        }
        Ok(first)
    }

    /// Reads a `rows × k` operand through descriptor `s` (start register of warpgroup `g`'s threads).
    #[allow(clippy::too_many_arguments)]
    fn read_desc(
        &mut self,
        g: usize,
        site: u32,
        s: &DescIns,
        (rows, k): (usize, usize),
        ty: WgmmaIn,
        smem: &mut Vec<(u32, usize)>,
    ) -> Result<Mat, SimError> {
        let dt = self.bufs[s.buf as usize].dtype;
        let esize = self.bufs[s.buf as usize].esize as i64;
        let name = self.bufs[s.buf as usize].name.clone();
        let start =
            self.wg_uniform(g, site, s.idx, &format!("the start of the descriptor of `{name}`"), |v| v as i64)?;
        let start_byte = start.saturating_mul(esize);
        // The warpgroup's reads are recorded as its first thread's.
        let t = self.wg_threads(g).start as u32;
        if start < 0 || start_byte % 16 != 0 {
            return Err(SimError::new(
                SimErrorKind::Misaligned,
                self.prog.sites[site as usize],
                format!("a wgmma descriptor of `{name}` starts at element {start} (byte {start_byte}), not a 16-byte aligned address"),
            ));
        }
        let mask = (1i64 << s.swizzle.mode()) - 1;
        if (start_byte >> 7) & mask != 0 {
            return Err(SimError::new(
                SimErrorKind::Misaligned,
                self.prog.sites[site as usize],
                format!(
                    "a {} wgmma descriptor of `{name}` starts at byte {start_byte}, inside a row group of the swizzle pattern (bits 7.. of the start must be a multiple of {} rows); the base offset field is not used",
                    s.swizzle.name(),
                    mask + 1
                ),
            ));
        }
        let desc = SmemDesc {
            buf: tirx_ir::lir::LBufId(s.buf),
            index: LExpr::i32(0),
            major: s.major,
            swizzle: s.swizzle,
            lbo: s.lbo as u32,
            sbo: s.sbo as u32,
        };
        let mut m = Mat { cols: k, v: vec![0.0; rows * k] };
        let mut bytes = [0u8; 4];
        for r in 0..rows {
            for c in 0..k {
                let at = s.swizzle.apply(start_byte + desc.offset(esize, r as i64, c as i64));
                let e = self.bounds(s.buf, t, at / esize, 1, site, "wgmma shared read")?;
                // A cp.async that still writes it is the first thing wrong (then the fence).
                if !self.fam.asy.inflight.is_empty() {
                    if let Some(err) = self.inflight_conflict(s.buf, t, e, Dir::Read, site) {
                        return Err(err);
                    }
                }
                self.proxy_check(s.buf, e, t, site, WGMMA_READER)?;
                self.read_raw_via(s.buf, t, e, 1, Dir::ReadWgmma, site, &mut bytes[..esize as usize])?;
                let x = f64::from_bits(decode(dt, &bytes));
                m.v[r * k + c] = if ty == WgmmaIn::TF32 { dot::to_tf32_trunc(x) } else { x };
                smem.push((s.buf, e));
            }
        }
        Ok(m)
    }

    /// The 64×k A operand from every thread's four registers (the register form).
    fn read_a_regs(&mut self, g: usize, site: u32, kind: WgmmaKind, b: u32, regs: &[i64]) -> Result<Mat, SimError> {
        let (k, per) = (kind.k() as usize, kind.a.per_reg());
        let (dt, esize) = (self.bufs[b as usize].dtype, self.bufs[b as usize].esize);
        let mut m = Mat { cols: k, v: vec![0.0; 64 * k] };
        for (i, t) in self.wg_threads(g).enumerate() {
            for (r, &first) in regs.iter().enumerate() {
                for e in 0..per {
                    let el = self.bounds(b, t as u32, first + e as i64, 1, site, "wgmma A register read")?;
                    self.local_init_check(b, t as u32, el, site);
                    let off = self.byte_off(b, t as u32, el);
                    let x = f64::from_bits(decode(dt, &self.bufs[b as usize].data[off..off + esize]));
                    let (row, col) = kind.coord_a(i, r, e);
                    // The register form's tf32 operands are rounded to nearest (cvt.rna), as for mma.sync.
                    m.v[row * k + col] = if kind.a == WgmmaIn::TF32 { dot::to_tf32(x) } else { x };
                }
            }
        }
        Ok(m)
    }

    /// Computes and writes every thread's accumulator registers.
    fn write_d(&mut self, g: usize, w: &WgmmaIns, a: &Mat, b: &Mat, scale: bool) -> Result<(), SimError> {
        let kind = w.kind;
        let (dt, esize) = (self.bufs[w.d as usize].dtype, self.bufs[w.d as usize].esize);
        let per = kind.acc_per_reg();
        let mut terms = Vec::with_capacity(a.cols + 1);
        for (i, t) in self.wg_threads(g).enumerate() {
            for (r, &first) in w.d_regs.iter().enumerate() {
                for e in 0..per {
                    let el = self.bounds(w.d, t as u32, first + e as i64, 1, w.site, "wgmma accumulator")?;
                    let off = self.byte_off(w.d, t as u32, el);
                    let (row, col) = kind.coord_d(i, r, e);
                    terms.clear();
                    terms.extend((0..a.cols).map(|j| a.v[row * a.cols + j] * b.v[col * b.cols + j]));
                    if scale {
                        self.local_init_check(w.d, t as u32, el, w.site);
                        terms.push(f64::from_bits(decode(dt, &self.bufs[w.d as usize].data[off..off + esize])));
                    }
                    let v = dot::sum_rn(&terms, dt);
                    let buf = &mut self.bufs[w.d as usize];
                    encode(dt, v.to_bits(), &mut buf.data[off..off + esize]);
                    buf.init[t * buf.elems + el] = self.cta_start;
                }
            }
        }
        Ok(())
    }

    /// The uninitialised-read warning of a register read outside `touch`.
    fn local_init_check(&mut self, b: u32, t: u32, e: usize, site: u32) {
        let buf = &self.bufs[b as usize];
        if buf.init[t as usize * buf.elems + e] != self.cta_start {
            self.warn_uninit(b, t, e, site);
        }
    }

    /// The hooks of `touch` (only for kernels with wgmma): a register of a pending
    /// wgmma, a shared element a pending wgmma reads; registers remember the access.
    #[cold]
    pub(crate) fn wgmma_touch(&mut self, b: u32, t: u32, e: usize, dir: Dir, site: u32) -> Result<(), SimError> {
        let space = self.bufs[b as usize].space;
        if space == Space::Local {
            let Some(tr) = self.fam.wg.local[b as usize].as_mut() else { return Ok(()) };
            let slot = t as usize * tr.elems + e;
            tr.dirty[slot] = site + 1;
            let p = tr.pending[slot];
            if p == 0 {
                return Ok(());
            }
            let rec = &self.fam.wg.records[p as usize - 1];
            let verb = if dir.is_write() { "writes" } else { "reads" };
            return Err(self
                .wg_error(
                    site,
                    format!(
                        "{} {verb} register `{}[{e}]` while the wgmma.mma_async that {} it has not been waited for: its value is undefined until wgmma.wait_group",
                        self.who(t),
                        self.bufs[b as usize].name,
                        if rec.regs.first().is_some_and(|(d, _)| *d == b) { "accumulates into" } else { "reads" }
                    ),
                )
                .label(self.prog.sites[rec.site as usize], "the wgmma was issued here")
                .help("wait first: `T.ptx.wgmma.commit_group()` (gemm_async commits), then `T.ptx.wgmma.wait_group(0)`"));
        }
        if space != Space::Shared || !dir.is_write() {
            return Ok(());
        }
        let nwg = self.fam.wg.nwg;
        let Some(rd) = self.fam.wg.smem[b as usize].as_ref() else { return Ok(()) };
        for g in 0..nwg {
            let id = rd[e * nwg + g];
            if id > self.fam.wg.wgs[g].done {
                let rec = &self.fam.wg.records[id as usize - 1];
                return Err(self
                    .wg_error(
                        site,
                        format!(
                            "{} writes {} element {e}, which a wgmma.mma_async of warpgroup {g} still reads (it has not been waited for)",
                            self.who(t),
                            self.bufs[b as usize].describe()
                        ),
                    )
                    .label(self.prog.sites[rec.site as usize], "the wgmma was issued here")
                    .help("overwrite a wgmma's shared inputs only after the wgmma.wait_group that covers it, and a barrier with the waiting warpgroup"));
            }
        }
        Ok(())
    }

    /// At exit: every wgmma of the thread's warpgroup must have been waited for.
    pub(crate) fn wgmma_exit(&self, t: u32) -> Result<(), SimError> {
        if !self.fam.wg.active {
            return Ok(());
        }
        let g = t as usize / WARPGROUP as usize;
        let p = &self.fam.wg.wgs[g];
        let Some(&first) = p.open.first().or_else(|| p.groups.iter().flatten().next()) else { return Ok(()) };
        let site = self.fam.wg.records[first as usize - 1].site;
        let what =
            if p.open.is_empty() { "not waited for (wgmma.wait_group)" } else { "not committed (wgmma.commit_group)" };
        Err(self
            .wg_error(
                site,
                format!("{} exits with a wgmma.mma_async {what}; its accumulator is never defined", self.who(t)),
            )
            .help(
                "end every batch of wgmma with wgmma.commit_group and wgmma.wait_group before the accumulator is used",
            ))
    }
}
