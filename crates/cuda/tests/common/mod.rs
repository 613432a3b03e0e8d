//! A small builder for hand-written LIR kernels, shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

pub mod kernels;

use tirx_ir::hir::{BarrierKind, MathFn};
use tirx_ir::lir::{
    AsyncOp, CacheHint, CollectiveOp, LBinOp, LBuf, LBufId, LExpr, LKernel, LStmt, LStmtKind, LVar, LVarId, LoadHints,
    MatrixDir, MatrixMove, MatrixOp, Mbar, MemOp, Mma, MmaShape, PackedOp, PairOp, PairSrc, PtxDir, PtxVec,
    ShuffleMode, Space, Special, SyncOp,
};
pub use tirx_ir::lir::{Major, SmemDesc, Wgmma, WgmmaA, WgmmaSwizzle, WgmmaSync};
use tirx_ir::{DType, Span};

pub struct Kb {
    k: LKernel,
}

impl Kb {
    pub fn new(name: &str, grid: [u32; 3], block: [u32; 3]) -> Kb {
        Kb { k: LKernel::new(name, grid, block) }
    }

    fn buf(&mut self, name: &str, dtype: DType, space: Space, shape: &[i64], dynamic: bool) -> LBufId {
        let id = LBufId(self.k.bufs.len() as u32);
        self.k.bufs.push(LBuf {
            name: name.into(),
            dtype,
            space,
            elems: shape.iter().product(),
            shape: shape.to_vec(),
            dynamic,
            dyn_rows: None,
            strides: None,
            align: 0,
        });
        id
    }

    pub fn param(&mut self, name: &str, dtype: DType, shape: &[i64]) -> LBufId {
        let id = self.buf(name, dtype, Space::Global, shape, false);
        self.k.params.push(id);
        id
    }

    pub fn shared(&mut self, name: &str, dtype: DType, shape: &[i64]) -> LBufId {
        self.buf(name, dtype, Space::Shared, shape, false)
    }

    pub fn shared_dyn(&mut self, name: &str, dtype: DType, shape: &[i64]) -> LBufId {
        self.buf(name, dtype, Space::Shared, shape, true)
    }

    pub fn local(&mut self, name: &str, dtype: DType, shape: &[i64]) -> LBufId {
        self.buf(name, dtype, Space::Local, shape, false)
    }

    /// A scalar parameter at position `index` of the signature.
    pub fn scalar(&mut self, name: &str, dtype: DType, index: usize) -> LVarId {
        let v = self.var(name, dtype);
        self.k.scalars.push(tirx_ir::lir::ScalarParam { var: v, index });
        v
    }

    /// Dim 0 of parameter `b` is `rows` at run time (its shape holds the bound).
    pub fn rows(&mut self, b: LBufId, rows: tirx_ir::lir::SymExpr) {
        self.k.bufs[b.0 as usize].dyn_rows = Some(rows);
    }

    pub fn grid_dim(&mut self, d: usize, e: tirx_ir::lir::SymExpr) {
        self.k.grid_dims[d] = Some(e);
    }

    pub fn var(&mut self, name: &str, dtype: DType) -> LVarId {
        let id = LVarId(self.k.vars.len() as u32);
        self.k.vars.push(LVar { name: name.into(), dtype });
        id
    }

    pub fn finish(mut self, body: Vec<LStmt>) -> LKernel {
        self.k.body = body;
        self.k
    }
}

fn st(kind: LStmtKind) -> LStmt {
    LStmt::new(kind, Span::default())
}

// ---- expressions ----

pub fn i(v: i64) -> LExpr {
    LExpr::Int(v, DType::I32)
}
pub fn l(v: i64) -> LExpr {
    LExpr::Int(v, DType::I64)
}
pub fn f(v: f64, t: DType) -> LExpr {
    LExpr::Float(v, t)
}
pub fn v(id: LVarId) -> LExpr {
    LExpr::Var(id)
}
pub fn tid() -> LExpr {
    LExpr::Special(Special::ThreadIdx(0))
}
pub fn bid() -> LExpr {
    LExpr::Special(Special::BlockIdx(0))
}
pub fn bin(op: LBinOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::bin(op, a, b)
}
pub fn add(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Add, a, b)
}
pub fn sub(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Sub, a, b)
}
pub fn mul(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Mul, a, b)
}
pub fn div(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Div, a, b)
}
pub fn rem(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Rem, a, b)
}
pub fn lt(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Lt, a, b)
}
pub fn eq(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Eq, a, b)
}
pub fn cast(t: DType, a: LExpr) -> LExpr {
    LExpr::Cast(t, Box::new(a))
}
pub fn math(m: MathFn, a: LExpr) -> LExpr {
    LExpr::Math(m, vec![a])
}
pub fn load(b: LBufId, idx: LExpr) -> LExpr {
    LExpr::Load(b, Box::new(idx))
}

// ---- statements ----

pub fn let_(var: LVarId, value: LExpr) -> LStmt {
    st(LStmtKind::Let { var, value })
}
pub fn for_(var: LVarId, extent: LExpr, body: Vec<LStmt>) -> LStmt {
    let begin = match extent {
        LExpr::Int(_, t) => LExpr::Int(0, t),
        _ => i(0),
    };
    st(LStmtKind::For { var, begin, extent, unroll: false, body })
}
pub fn unroll(var: LVarId, extent: LExpr, body: Vec<LStmt>) -> LStmt {
    let mut s = for_(var, extent, body);
    if let LStmtKind::For { unroll, .. } = &mut s.kind {
        *unroll = true;
    }
    s
}
pub fn if_(cond: LExpr, then_body: Vec<LStmt>) -> LStmt {
    st(LStmtKind::If { cond, then_body, else_body: vec![] })
}
pub fn if_else(cond: LExpr, then_body: Vec<LStmt>, else_body: Vec<LStmt>) -> LStmt {
    st(LStmtKind::If { cond, then_body, else_body })
}
pub fn printf(format: &str, args: Vec<LExpr>) -> LStmt {
    st(LStmtKind::Debug(tirx_ir::lir::DebugOp::Printf { format: format.into(), args }))
}
pub fn store(buf: LBufId, index: LExpr, value: LExpr) -> LStmt {
    st(LStmtKind::Memory(MemOp::Store { buf, index, value }))
}
pub fn vcopy(dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, lanes: u32) -> LStmt {
    st(LStmtKind::Memory(MemOp::VecCopy { dst, dst_index, src, src_index, lanes, cache: CacheHint::Default }))
}
pub fn vcopy_nc(dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, lanes: u32) -> LStmt {
    st(LStmtKind::Memory(MemOp::VecCopy { dst, dst_index, src, src_index, lanes, cache: CacheHint::NonCoherent }))
}
/// `ld.<space>[hints].<form>` of `bytes` from `mem[mem_index]` into the registers `reg[reg_index..]`.
pub fn ptx_ld(reg: LBufId, reg_index: LExpr, mem: LBufId, mem_index: LExpr, bytes: u32, hints: LoadHints) -> LStmt {
    st(LStmtKind::Memory(MemOp::PtxVec(PtxVec { dir: PtxDir::Ld(hints), mem, mem_index, reg, reg_index, bytes })))
}
/// `st.<space>.<form>` of `bytes` from the registers `reg[reg_index..]` to `mem[mem_index]`.
pub fn ptx_st(mem: LBufId, mem_index: LExpr, reg: LBufId, reg_index: LExpr, bytes: u32) -> LStmt {
    st(LStmtKind::Memory(MemOp::PtxVec(PtxVec { dir: PtxDir::St, mem, mem_index, reg, reg_index, bytes })))
}
pub fn cta_sync() -> LStmt {
    st(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta)))
}
pub fn warp_sync() -> LStmt {
    st(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Warp)))
}
pub fn ldmatrix(num: u8, trans: bool, smem: LBufId, smem_index: LExpr, regs: LBufId, reg_index: Vec<LExpr>) -> LStmt {
    st(LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
        dir: MatrixDir::Load,
        num,
        trans,
        smem,
        smem_index,
        regs,
        reg_index,
    })))
}
pub fn stmatrix(num: u8, trans: bool, smem: LBufId, smem_index: LExpr, regs: LBufId, reg_index: Vec<LExpr>) -> LStmt {
    st(LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
        dir: MatrixDir::Store,
        num,
        trans,
        smem,
        smem_index,
        regs,
        reg_index,
    })))
}
/// `mma.sync` of `shape` with constant register indices, accumulating into `c` in place when `d == c`.
#[allow(clippy::too_many_arguments)]
pub fn mma(
    shape: MmaShape,
    d: LBufId,
    d_index: Vec<i64>,
    a: LBufId,
    a_index: Vec<i64>,
    b: LBufId,
    b_index: Vec<i64>,
    c: LBufId,
    c_index: Vec<i64>,
) -> LStmt {
    let ix = |v: Vec<i64>| v.into_iter().map(i).collect();
    st(LStmtKind::Matrix(MatrixOp::Mma(Mma {
        shape,
        d,
        d_index: ix(d_index),
        a,
        a_index: ix(a_index),
        b,
        b_index: ix(b_index),
        c,
        c_index: ix(c_index),
    })))
}
pub fn packed2(op: PackedOp, dtype: DType, dst: LBufId, dst_index: LExpr, srcs: Vec<PairSrc>) -> LStmt {
    st(LStmtKind::Pair(PairOp::Packed2 { op, dtype, dst, dst_index, srcs }))
}
pub fn cast2(dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr) -> LStmt {
    st(LStmtKind::Pair(PairOp::Cast2 { dst, dst_index, src, src_index }))
}
/// `let var = shfl.sync.mode(value, lane_or_delta)` over `mask`, in segments of `width`.
pub fn shfl(var: LVarId, value: LExpr, mode: ShuffleMode, lane_or_delta: LExpr, width: u32, mask: u32) -> LStmt {
    st(LStmtKind::Collective(CollectiveOp::Shuffle { var, value, mode, lane_or_delta, width, mask }))
}
pub fn cp_async(
    dst: LBufId,
    dst_index: LExpr,
    src: LBufId,
    src_index: LExpr,
    bytes: u32,
    src_bytes: Option<LExpr>,
) -> LStmt {
    st(LStmtKind::Async(AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes, prefetch: None }))
}
/// `cp.async` of 16 bytes with the L2 prefetching `prefetch` bytes around the source.
pub fn cp_async_prefetch(dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, prefetch: u32) -> LStmt {
    st(LStmtKind::Async(AsyncOp::CpAsync {
        dst,
        dst_index,
        src,
        src_index,
        bytes: 16,
        src_bytes: None,
        prefetch: Some(prefetch),
    }))
}
pub fn fence_mbarrier_init() -> LStmt {
    st(LStmtKind::Async(AsyncOp::FenceMbarrierInit))
}
pub fn commit_group() -> LStmt {
    st(LStmtKind::Async(AsyncOp::CommitGroup))
}
pub fn wait_group(n: u32) -> LStmt {
    st(LStmtKind::Async(AsyncOp::WaitGroup(n)))
}
pub fn mbar_init(buf: LBufId, index: LExpr, count: LExpr) -> LStmt {
    st(LStmtKind::Async(AsyncOp::MbarInit { bar: Mbar { buf, index }, count }))
}
pub fn mbar_arrive(buf: LBufId, index: LExpr) -> LStmt {
    st(LStmtKind::Async(AsyncOp::MbarArrive { bar: Mbar { buf, index }, cta: None, cta_scope: false }))
}
pub fn mbar_arrive_expect_tx(buf: LBufId, index: LExpr, bytes: LExpr) -> LStmt {
    st(LStmtKind::Async(AsyncOp::MbarArriveExpectTx { bar: Mbar { buf, index }, bytes }))
}
pub fn mbar_wait(buf: LBufId, index: LExpr, parity: LExpr) -> LStmt {
    st(LStmtKind::Async(AsyncOp::MbarWait { bar: Mbar { buf, index }, parity }))
}
pub fn fence_proxy_async() -> LStmt {
    st(LStmtKind::Async(AsyncOp::FenceProxyAsync))
}
pub fn bar_sync(id: LExpr, threads: u32) -> LStmt {
    st(LStmtKind::Sync(SyncOp::NamedBarrier { id, threads }))
}
pub fn comment(text: &str) -> LStmt {
    st(LStmtKind::Comment(text.into()))
}
pub fn wgmma_sync(s: WgmmaSync) -> LStmt {
    st(LStmtKind::Matrix(MatrixOp::WgmmaSync(s)))
}
pub fn wgmma(w: Wgmma) -> LStmt {
    st(LStmtKind::Matrix(MatrixOp::Wgmma(w)))
}
pub fn desc(buf: LBufId, index: LExpr, major: Major, swizzle: WgmmaSwizzle, lbo: u32, sbo: u32) -> SmemDesc {
    SmemDesc { buf, index, major, swizzle, lbo, sbo }
}
pub fn bar_arrive(id: LExpr, threads: u32) -> LStmt {
    st(LStmtKind::Sync(SyncOp::NamedBarrierArrive { id, threads }))
}
pub fn setmaxnreg(inc: bool, regs: u32) -> LStmt {
    st(LStmtKind::Sync(SyncOp::SetMaxNReg { inc, regs }))
}
