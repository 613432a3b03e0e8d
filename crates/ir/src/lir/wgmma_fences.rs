//! Which registers each `wgmma.fence` and `wgmma.wait_group` orders.
//!
//! A wgmma reads and writes its registers asynchronously: after it is issued,
//! until a `wait_group` retires it. The compiler of the generated CUDA does not
//! know that, so at each fence and wait the registers it orders go through an
//! empty `asm volatile` that reads and writes them (CUTLASS's
//! `warpgroup_fence_operand`). Doing so for every wgmma register at every sync
//! kept registers live where they were dead — the 16-bit operands of a loop's
//! last GEMMs across the back edge into its first — and ptxas, short of
//! registers, serialized the wgmmas (C7511). Here each sync gets its own set:
//!
//! * a `wgmma.fence`: the registers of the wgmmas it guards, those that may be
//!   issued after it before another fence (a backward analysis: earlier writes
//!   of them stay before it);
//! * a `wgmma.wait_group`: the registers of the wgmmas that may be in flight
//!   there — issued, and not retired by a `wait_group 0` on some path to it (a
//!   forward analysis: later reads and writes of them stay after it, and they
//!   stay allocated until it).
//!
//! Both run over the structured body, loops to a fixed point (a loop may run
//! zero times; what one iteration leaves reaches the next), branches joined by
//! union: every path is covered, so a set is never smaller than the syncs'
//! semantics need. The sets are registers, not buffers: a buffer whose first
//! half is a later GEMM's accumulator keeps its second half free there. Only
//! register (local) buffers are fenced.
//!
//! A fence's **fresh** registers ([`WgmmaFences::fresh`]) are those of its set
//! that the wgmmas right after it overwrite without reading: the accumulator
//! of a wgmma with `scale_d` false, met before any other access in the run of
//! wgmmas that follows the fence, and not in flight there. Their old values are
//! dead; the code generator defines them anew at the fence rather than reading
//! them, so that a loop's non-accumulating GEMM (S = QKᵀ each step) does not
//! keep its accumulator live across the back edge — as a fragment declared
//! inside the loop body is not, in CUTLASS. (Kept live, 64 x 128 scores and
//! their gradient beside dK and dV left ptxas too few registers: C7512.)

use super::{LBufId, LExpr, LKernel, LStmt, LStmtKind, MatrixOp, Space, Wgmma, WgmmaA, WgmmaSync};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Registers: for each buffer, the first elements of the 32-bit registers named.
pub type Regs = BTreeMap<LBufId, BTreeSet<i64>>;

fn add(to: &mut Regs, from: &Regs) {
    for (b, e) in from {
        to.entry(*b).or_default().extend(e);
    }
}

/// The registers each wgmma sync of a kernel orders ([`LKernel::wgmma_fences`]).
#[derive(Debug, Default)]
pub struct WgmmaFences {
    /// Keyed by the address of the sync inside the kernel's body (a statement's
    /// identity, as the code generator meets it).
    at: HashMap<usize, Regs>,
    /// Per fence, its fresh registers (see the module's documentation).
    fresh: HashMap<usize, Regs>,
}

impl WgmmaFences {
    /// The registers `sync` — a reference into the analysed kernel's body —
    /// orders; `None` for a sync that is not part of it.
    pub fn of(&self, sync: &WgmmaSync) -> Option<&Regs> {
        self.at.get(&key(sync))
    }

    /// The registers of `sync`'s set (a fence) that its wgmmas overwrite without
    /// reading them: their old values are dead there.
    pub fn fresh(&self, sync: &WgmmaSync) -> Option<&Regs> {
        self.fresh.get(&key(sync))
    }

    fn record(&mut self, sync: &WgmmaSync, regs: &Regs) {
        add(self.at.entry(key(sync)).or_default(), regs);
    }
}

fn key(sync: &WgmmaSync) -> usize {
    std::ptr::from_ref(sync) as usize
}

/// The wgmmas in flight at a point: committed groups, and the open group.
#[derive(Clone, Default, PartialEq)]
struct Flight {
    committed: Regs,
    open: Regs,
}

impl Flight {
    fn join(mut self, other: Flight) -> Flight {
        add(&mut self.committed, &other.committed);
        add(&mut self.open, &other.open);
        self
    }

    fn all(&self) -> Regs {
        let mut all = self.committed.clone();
        add(&mut all, &self.open);
        all
    }
}

struct Analysis<'a> {
    k: &'a LKernel,
    out: WgmmaFences,
    /// Per fence, the registers of the wgmmas that may be in flight there.
    in_flight: HashMap<usize, Regs>,
}

impl Analysis<'_> {
    /// The registers `w` reads or writes: its accumulator's, and A's where A
    /// comes from registers (a run-time index, which the checker rejects: the
    /// whole buffer).
    fn regs(&self, w: &Wgmma) -> Regs {
        let mut out = self.d_regs(w);
        add(&mut out, &self.a_regs(w));
        out
    }

    /// The registers of `w`'s accumulator.
    fn d_regs(&self, w: &Wgmma) -> Regs {
        self.local_regs([(w.d, &w.d_index)])
    }

    /// The registers `w` reads A from (none where A is in shared memory).
    fn a_regs(&self, w: &Wgmma) -> Regs {
        match &w.a {
            WgmmaA::Regs { buf, index } => self.local_regs([(*buf, index)]),
            WgmmaA::Smem(_) => Regs::new(),
        }
    }

    fn local_regs<'e>(&self, named: impl IntoIterator<Item = (LBufId, &'e Vec<LExpr>)>) -> Regs {
        let mut out = Regs::new();
        for (b, index) in named {
            let Some(buf) = self.k.bufs.get(b.0 as usize).filter(|x| x.space == Space::Local) else {
                continue;
            };
            let consts: Option<BTreeSet<i64>> =
                index.iter().map(|e| if let LExpr::Int(v, _) = e { Some(*v) } else { None }).collect();
            let per = (4 / buf.dtype.bytes().max(1) as i64).max(1);
            out.entry(b)
                .or_default()
                .extend(consts.unwrap_or_else(|| (0..buf.elems - buf.elems % per).step_by(per as usize).collect()));
        }
        out
    }

    /// The wgmmas in flight after `body`, from those in flight before it;
    /// records each wait's set.
    fn forward(&mut self, body: &[LStmt], mut st: Flight) -> Flight {
        for s in body {
            match &s.kind {
                LStmtKind::Matrix(MatrixOp::Wgmma(w)) => add(&mut st.open, &self.regs(w)),
                LStmtKind::Matrix(MatrixOp::WgmmaSync(sync)) => match sync {
                    WgmmaSync::Commit => {
                        let open = std::mem::take(&mut st.open);
                        add(&mut st.committed, &open);
                    }
                    WgmmaSync::Wait(n) => {
                        self.out.record(sync, &st.all());
                        if *n == 0 {
                            st.committed.clear();
                        }
                    }
                    WgmmaSync::Fence => add(self.in_flight.entry(key(sync)).or_default(), &st.all()),
                },
                LStmtKind::For { body, .. } | LStmtKind::While { body, .. } => {
                    let mut head = st;
                    st = loop {
                        let next = head.clone().join(self.forward(body, head.clone()));
                        if next == head {
                            break head;
                        }
                        head = next;
                    };
                }
                LStmtKind::If { then_body, else_body, .. } => {
                    let then_out = self.forward(then_body, st.clone());
                    st = then_out.join(self.forward(else_body, st));
                }
                _ => {}
            }
        }
        st
    }

    /// The registers of the wgmmas that may be issued from before `body` until
    /// a fence, from those after it; records each fence's set.
    fn backward(&mut self, body: &[LStmt], mut st: Regs) -> Regs {
        for s in body.iter().rev() {
            match &s.kind {
                LStmtKind::Matrix(MatrixOp::Wgmma(w)) => add(&mut st, &self.regs(w)),
                LStmtKind::Matrix(MatrixOp::WgmmaSync(sync @ WgmmaSync::Fence)) => {
                    self.out.record(sync, &st);
                    st.clear();
                }
                LStmtKind::For { body, .. } | LStmtKind::While { body, .. } => {
                    let mut head = st;
                    st = loop {
                        let mut next = head.clone();
                        add(&mut next, &self.backward(body, head.clone()));
                        if next == head {
                            break head;
                        }
                        head = next;
                    };
                }
                LStmtKind::If { then_body, else_body, .. } => {
                    let mut then_in = self.backward(then_body, st.clone());
                    add(&mut then_in, &self.backward(else_body, st));
                    st = then_in;
                }
                _ => {}
            }
        }
        st
    }

    /// Records each fence's fresh registers: in the run of wgmmas right after
    /// it (in the same body), the accumulators of those with `scale_d` false
    /// not accessed before, less what may be in flight at the fence.
    fn fresh(&mut self, body: &[LStmt]) {
        for (i, s) in body.iter().enumerate() {
            for b in s.kind.bodies() {
                self.fresh(b);
            }
            let LStmtKind::Matrix(MatrixOp::WgmmaSync(sync @ WgmmaSync::Fence)) = &s.kind else { continue };
            let (mut seen, mut fresh) = (Regs::new(), Regs::new());
            for next in &body[i + 1..] {
                let LStmtKind::Matrix(MatrixOp::Wgmma(w)) = &next.kind else { break };
                if w.scale_d == LExpr::Bool(false) {
                    for (b, regs) in self.d_regs(w) {
                        let unseen = regs.iter().filter(|r| !seen.get(&b).is_some_and(|x| x.contains(r)));
                        fresh.entry(b).or_default().extend(unseen);
                    }
                }
                add(&mut seen, &self.regs(w));
            }
            let busy = self.in_flight.get(&key(sync)).cloned().unwrap_or_default();
            for (b, regs) in &mut fresh {
                if let Some(x) = busy.get(b) {
                    regs.retain(|r| !x.contains(r));
                }
            }
            fresh.retain(|_, regs| !regs.is_empty());
            self.out.fresh.insert(key(sync), fresh);
        }
    }
}

impl LKernel {
    /// The registers each `wgmma.fence` and `wgmma.wait_group` of the body
    /// orders, and each fence's fresh ones (see the module's documentation).
    pub fn wgmma_fences(&self) -> WgmmaFences {
        let mut a = Analysis { k: self, out: WgmmaFences::default(), in_flight: HashMap::new() };
        a.forward(&self.body, Flight::default());
        a.backward(&self.body, Regs::new());
        a.fresh(&self.body);
        a.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::lir::{LBuf, LExpr, LVarId, Major, SmemDesc, WgmmaSwizzle};

    fn st(kind: LStmtKind) -> LStmt {
        LStmt::new(kind, Default::default())
    }

    fn sync(s: WgmmaSync) -> LStmt {
        st(LStmtKind::Matrix(MatrixOp::WgmmaSync(s)))
    }

    /// A wgmma into register buffer `d` (A from registers `a`, else shared memory).
    fn mma(d: u32, a: Option<u32>) -> LStmt {
        mma_at(d, 0, a)
    }

    /// ... its accumulator the 8 registers from element `d0`.
    fn mma_at(d: u32, d0: i64, a: Option<u32>) -> LStmt {
        let desc = SmemDesc {
            buf: LBufId(0),
            index: LExpr::i32(0),
            major: Major::K,
            swizzle: WgmmaSwizzle::B32,
            lbo: 16,
            sbo: 256,
        };
        let a = match a {
            Some(b) => WgmmaA::Regs { buf: LBufId(b), index: (0..4).map(|i| LExpr::i32(2 * i)).collect() },
            None => WgmmaA::Smem(desc.clone()),
        };
        st(LStmtKind::Matrix(MatrixOp::Wgmma(Wgmma {
            n: 16,
            d: LBufId(d),
            d_index: (d0..d0 + 8).map(LExpr::i32).collect(),
            a,
            b: desc,
            scale_d: LExpr::Bool(true),
        })))
    }

    fn for_(body: Vec<LStmt>) -> LStmt {
        st(LStmtKind::For { var: LVarId(0), begin: LExpr::i32(0), extent: LExpr::i32(4), unroll: false, body })
    }

    /// Buffer 0 shared; 1.. registers (the kernel is not validated: the analysis reads only the statements).
    fn kernel(body: Vec<LStmt>) -> LKernel {
        let buf = |name: &str, space| LBuf {
            name: name.into(),
            dtype: DType::F32,
            space,
            elems: 8,
            shape: vec![8],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        };
        let bufs = vec![
            buf("S_s", Space::Shared),
            buf("s", Space::Local),
            buf("o", Space::Local),
            buf("p", Space::Local),
            buf("q", Space::Local),
        ];
        LKernel { bufs, body, ..LKernel::new("k", [1; 3], [128, 1, 1]) }
    }

    /// The kernel's syncs in the order they appear (pre-order).
    fn syncs(k: &LKernel) -> Vec<&WgmmaSync> {
        fn walk<'a>(body: &'a [LStmt], out: &mut Vec<&'a WgmmaSync>) {
            for s in body {
                if let LStmtKind::Matrix(MatrixOp::WgmmaSync(w)) = &s.kind {
                    out.push(w);
                }
                for b in s.kind.bodies() {
                    walk(b, out);
                }
            }
        }
        let mut out = vec![];
        walk(&k.body, &mut out);
        out
    }

    /// The sets of the syncs in the order they appear, as buffer ids.
    fn sets(k: &LKernel) -> Vec<(WgmmaSync, Vec<u32>)> {
        let f = k.wgmma_fences();
        syncs(k)
            .into_iter()
            .filter(|s| **s != WgmmaSync::Commit)
            .map(|s| (*s, f.of(s).expect("analysed").keys().map(|b| b.0).collect()))
            .collect()
    }

    /// Attention's two GEMMs: `s` (the scores into s, buffer 1), waited for; then P (registers 3)
    /// · V into o (buffer 2), waited for.
    fn scores_then_pv(s: Vec<LStmt>) -> Vec<LStmt> {
        let mut body = vec![sync(WgmmaSync::Fence)];
        body.extend(s);
        body.extend([
            sync(WgmmaSync::Commit),
            sync(WgmmaSync::Wait(0)),
            sync(WgmmaSync::Fence),
            mma(2, Some(3)),
            sync(WgmmaSync::Commit),
            sync(WgmmaSync::Wait(0)),
        ]);
        body
    }

    #[test]
    fn a_fence_orders_the_wgmmas_it_guards_a_wait_those_in_flight() {
        // S = ..., wait; P (registers 3) · V into o: the first fence and wait know nothing of o and p.
        let k = kernel(scores_then_pv(vec![mma(1, None)]));
        use WgmmaSync::{Fence, Wait};
        assert_eq!(sets(&k), vec![(Fence, vec![1]), (Wait(0), vec![1]), (Fence, vec![2, 3]), (Wait(0), vec![2, 3])]);
    }

    #[test]
    fn a_group_left_in_flight_reaches_the_next_iterations_waits() {
        // A pipelined loop: o's GEMM issued at the end of an iteration, waited for (wait 1)
        // at the next one's first wait, retired by its last; s's GEMM never crosses the edge.
        let k = kernel(vec![
            for_(vec![
                sync(WgmmaSync::Fence),
                mma(1, None),
                sync(WgmmaSync::Commit),
                sync(WgmmaSync::Wait(1)),
                sync(WgmmaSync::Wait(0)),
                sync(WgmmaSync::Fence),
                mma(2, Some(3)),
                sync(WgmmaSync::Commit),
            ]),
            sync(WgmmaSync::Wait(0)),
        ]);
        use WgmmaSync::{Fence, Wait};
        assert_eq!(
            sets(&k),
            vec![
                (Fence, vec![1]),
                (Wait(1), vec![1, 2, 3]),
                (Wait(0), vec![1, 2, 3]),
                (Fence, vec![2, 3]),
                (Wait(0), vec![2, 3])
            ]
        );
    }

    #[test]
    fn branches_join_and_an_open_group_survives_a_wait() {
        // One branch issues into q without committing: a wait 0 does not retire it.
        let k = kernel(vec![
            sync(WgmmaSync::Fence),
            st(LStmtKind::If {
                cond: LExpr::Bool(true),
                then_body: vec![mma(4, None)],
                else_body: vec![mma(1, None), sync(WgmmaSync::Commit)],
            }),
            sync(WgmmaSync::Wait(0)),
            sync(WgmmaSync::Wait(0)),
        ]);
        use WgmmaSync::{Fence, Wait};
        assert_eq!(sets(&k), vec![(Fence, vec![1, 4]), (Wait(0), vec![1, 4]), (Wait(0), vec![4])]);
    }

    #[test]
    fn a_fence_at_a_loops_end_guards_the_next_iterations_first_wgmmas() {
        // The fence ends the body: it guards the next iteration's first wgmma (s) and, where
        // the loop exits, the one after it (o).
        let k = kernel(vec![
            for_(vec![mma(1, None), sync(WgmmaSync::Commit), sync(WgmmaSync::Wait(0)), sync(WgmmaSync::Fence)]),
            mma(2, None),
        ]);
        use WgmmaSync::{Fence, Wait};
        assert_eq!(sets(&k), vec![(Wait(0), vec![1]), (Fence, vec![1, 2])]);
    }

    /// `s` (a wgmma) not accumulating: `D = A·B`.
    fn fresh_d(mut s: LStmt) -> LStmt {
        if let LStmtKind::Matrix(MatrixOp::Wgmma(w)) = &mut s.kind {
            w.scale_d = LExpr::Bool(false);
        }
        s
    }

    /// Each fence's fresh registers, as buffer ids, in the order the fences appear.
    fn fresh_sets(k: &LKernel) -> Vec<Vec<u32>> {
        let f = k.wgmma_fences();
        let fences = syncs(k).into_iter().filter(|s| **s == WgmmaSync::Fence);
        fences.map(|s| f.fresh(s).expect("a fence").keys().map(|b| b.0).collect()).collect()
    }

    #[test]
    fn a_loops_non_accumulating_gemm_overwrites_fresh_registers() {
        // Each iteration: s = Q Kᵀ (not accumulating, then accumulating over k), o += P V with P
        // in registers p: s's registers are fresh at its fence, o's and p's are read there.
        let k = kernel(vec![for_(scores_then_pv(vec![fresh_d(mma(1, None)), mma(1, None)]))]);
        assert_eq!(fresh_sets(&k), vec![vec![1], vec![]]);
    }

    #[test]
    fn registers_read_first_or_in_flight_are_not_fresh() {
        // s's registers 0, 2, 4, 6 read as A before a non-accumulating wgmma writes s (0..8):
        // only 1, 3, 5, 7 are fresh; o's first GEMM still in flight at the second fence (no
        // wait between): its old value is not dead there.
        let k = kernel(vec![
            sync(WgmmaSync::Fence),
            mma(2, Some(1)),
            fresh_d(mma(1, None)),
            sync(WgmmaSync::Commit),
            sync(WgmmaSync::Fence),
            fresh_d(mma(2, None)),
            sync(WgmmaSync::Commit),
            sync(WgmmaSync::Wait(0)),
        ]);
        let f = k.wgmma_fences();
        let fresh = |i: usize| {
            let LStmtKind::Matrix(MatrixOp::WgmmaSync(sync)) = &k.body[i].kind else { unreachable!("a sync") };
            f.fresh(sync).cloned()
        };
        assert_eq!(fresh(0), Some([(LBufId(1), [1, 3, 5, 7].into_iter().collect())].into_iter().collect()));
        assert_eq!(fresh(4), Some(Regs::new()));
    }

    #[test]
    fn the_sets_name_registers_not_buffers() {
        // An accumulator in the second half of s (16 registers): its first half is not fenced;
        // p, 16-bit A registers, by the first element of each 32-bit word.
        let mut k = kernel(vec![
            sync(WgmmaSync::Fence),
            mma_at(1, 8, Some(3)),
            sync(WgmmaSync::Commit),
            sync(WgmmaSync::Wait(0)),
        ]);
        k.bufs[1].elems = 16;
        k.bufs[3].dtype = DType::BF16;
        let f = k.wgmma_fences();
        let want: Regs =
            [(LBufId(1), (8..16).collect()), (LBufId(3), (0..8).step_by(2).collect())].into_iter().collect();
        for s in [&k.body[0], &k.body[3]] {
            let LStmtKind::Matrix(MatrixOp::WgmmaSync(sync)) = &s.kind else { unreachable!("a sync") };
            assert_eq!(f.of(sync), Some(&want));
        }
    }
}
