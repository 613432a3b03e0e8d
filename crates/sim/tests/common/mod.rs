//! A tiny builder for hand-written LIR kernels in tests.
#![allow(dead_code)]

use tirx_ir::hir::{BarrierKind, MathFn, UnOp};
use tirx_ir::lir::*;
use tirx_ir::{DType, Span};

pub struct Kb {
    pub k: LKernel,
}

impl Kb {
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Kb {
        Kb { k: LKernel::new("k", grid, block) }
    }
    fn buf(&mut self, name: &str, dtype: DType, space: Space, elems: i64) -> LBufId {
        self.k.bufs.push(LBuf::flat(name, dtype, space, elems));
        LBufId(self.k.bufs.len() as u32 - 1)
    }
    pub fn param(&mut self, name: &str, dtype: DType, elems: i64) -> LBufId {
        let b = self.buf(name, dtype, Space::Global, elems);
        self.k.params.push(b);
        b
    }
    pub fn shared(&mut self, name: &str, dtype: DType, elems: i64) -> LBufId {
        self.buf(name, dtype, Space::Shared, elems)
    }
    pub fn local(&mut self, name: &str, dtype: DType, elems: i64) -> LBufId {
        self.buf(name, dtype, Space::Local, elems)
    }
    pub fn var(&mut self, name: &str, dtype: DType) -> LVarId {
        self.k.vars.push(LVar { name: name.into(), dtype });
        LVarId(self.k.vars.len() as u32 - 1)
    }
    pub fn finish(mut self, body: Vec<LStmt>) -> LKernel {
        self.k.body = body;
        self.k
    }
}

/// A statement with the span `[at, at+1)`, so tests can tell statements apart.
pub fn at(at: usize, kind: LStmtKind) -> LStmt {
    LStmt::new(kind, Span::new(at, at + 1))
}
pub fn span(at: usize) -> Span {
    Span::new(at, at + 1)
}

pub fn int(v: i64) -> LExpr {
    LExpr::Int(v, DType::I32)
}
pub fn typed(v: i64, t: DType) -> LExpr {
    LExpr::Int(v, t)
}
pub fn flt(v: f64, t: DType) -> LExpr {
    LExpr::Float(v, t)
}
pub fn tid() -> LExpr {
    LExpr::Special(Special::ThreadIdx(0))
}
pub fn bid() -> LExpr {
    LExpr::Special(Special::BlockIdx(0))
}
pub fn v(x: LVarId) -> LExpr {
    LExpr::Var(x)
}
pub fn bin(op: LBinOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::bin(op, a, b)
}
pub fn add(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Add, a, b)
}
pub fn mul(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Mul, a, b)
}
pub fn lt(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Lt, a, b)
}
pub fn rem(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Rem, a, b)
}
pub fn div(a: LExpr, b: LExpr) -> LExpr {
    bin(LBinOp::Div, a, b)
}
pub fn un(op: UnOp, a: LExpr) -> LExpr {
    LExpr::Un(op, Box::new(a))
}
pub fn cast(t: DType, a: LExpr) -> LExpr {
    LExpr::Cast(t, Box::new(a))
}
pub fn math(f: MathFn, a: LExpr) -> LExpr {
    LExpr::Math(f, vec![a])
}
pub fn select(c: LExpr, a: LExpr, b: LExpr) -> LExpr {
    LExpr::Select(Box::new(c), Box::new(a), Box::new(b))
}
pub fn load(b: LBufId, i: LExpr) -> LExpr {
    LExpr::Load(b, Box::new(i))
}
pub fn lane() -> LExpr {
    rem(tid(), int(32))
}

pub fn store(buf: LBufId, index: LExpr, value: LExpr) -> LStmtKind {
    LStmtKind::Memory(MemOp::Store { buf, index, value })
}
pub fn let_(var: LVarId, value: LExpr) -> LStmtKind {
    LStmtKind::Let { var, value }
}
pub fn for_(var: LVarId, extent: i64, body: Vec<LStmt>) -> LStmtKind {
    LStmtKind::For { var, begin: int(0), extent: int(extent), unroll: false, body }
}
pub fn if_(cond: LExpr, then_body: Vec<LStmt>) -> LStmtKind {
    LStmtKind::If { cond, then_body, else_body: vec![] }
}
pub fn vcopy(dst: LBufId, di: LExpr, src: LBufId, si: LExpr, lanes: u32) -> LStmtKind {
    LStmtKind::Memory(MemOp::VecCopy { dst, dst_index: di, src, src_index: si, lanes, cache: CacheHint::Default })
}
pub fn cta_sync() -> LStmtKind {
    LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta))
}
pub fn warp_sync() -> LStmtKind {
    LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Warp))
}
pub fn bar_sync(id: LExpr, threads: u32) -> LStmtKind {
    LStmtKind::Sync(SyncOp::NamedBarrier { id, threads })
}
pub fn bar_arrive(id: LExpr, threads: u32) -> LStmtKind {
    LStmtKind::Sync(SyncOp::NamedBarrierArrive { id, threads })
}
pub fn setmaxnreg(inc: bool, regs: u32) -> LStmtKind {
    LStmtKind::Sync(SyncOp::SetMaxNReg { inc, regs })
}
