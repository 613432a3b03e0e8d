//! What a kernel does with global memory, read off its LIR: whether it only moves
//! data, and how many bytes it reads and writes.
//!
//! *Data-only*: every statement that writes memory stores a value it loaded, unchanged:
//! `Store` whose value is a `Load`, a same-type `Cast` of one, or a `Select` among
//! loads and literals (a guarded copy with a fill value), and every instruction of the
//! other families that writes a buffer without computing ([`Instr::computes`](crate::lir::Instr::computes) is
//! `None`: `VecCopy`, `ldmatrix`/`stmatrix`, `cp.async`). `Packed2`, `Cast2`, `mma.sync` and stores
//! of computed values are arithmetic. A kernel with no store at all moves nothing and
//! is not data-only. The walk is generic over the families: it reads each statement's
//! buffers off [`Instr::traffic`](crate::lir::Instr::traffic) (a TMA copy's global buffer is the one its tensor
//! map describes) and its expressions off [`LStmtKind::operands`](crate::lir::LStmtKind::operands).
//!
//! *Traffic*: each parameter that is read anywhere counts its full size once as read,
//! each one stored to counts its full size once as written. This is exact for kernels
//! that touch every element of each parameter once (the copy benchmarks) and an
//! estimate otherwise; `tirx bench` says so next to the number.

#[cfg(test)]
use crate::dtype::DType;
use crate::lir::{LBufId, LExpr, LKernel, LStmt};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Traffic {
    pub data_only: bool,
    /// When not data-only: the first statement that computes, in words.
    pub not_data_only_because: Option<String>,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Traffic {
    /// Read plus written bytes.
    pub fn total(&self) -> u64 {
        self.bytes_read + self.bytes_written
    }
    /// Size of a device-to-device memcpy with the same total traffic: it reads and
    /// writes this many bytes each.
    pub fn memcpy_bytes(&self) -> u64 {
        self.total() / 2
    }
}

pub fn analyze(k: &LKernel) -> Traffic {
    let w = Walk::of(k);
    let sum = |flags: &[bool]| -> u64 {
        k.params
            .iter()
            .filter(|p| flags.get(p.0 as usize).copied().unwrap_or(false))
            .map(|p| {
                let b = k.buf(*p);
                (b.elems.max(0) as u64).saturating_mul(b.dtype.bytes() as u64)
            })
            .fold(0u64, u64::saturating_add)
    };
    let data_only = w.compute.is_none() && w.stores > 0;
    let because = match (&w.compute, w.stores) {
        (Some(c), _) => Some(c.clone()),
        (None, 0) => Some("the kernel stores nothing".into()),
        _ => None,
    };
    Traffic { data_only, not_data_only_because: because, bytes_read: sum(&w.read), bytes_written: sum(&w.written) }
}

/// Which buffers (by index) the kernel writes: a store, or any instruction that writes
/// one ([`Instr::traffic`](crate::lir::Instr::traffic)).
pub fn written(k: &LKernel) -> Vec<bool> {
    Walk::of(k).written
}

struct Walk<'k> {
    k: &'k LKernel,
    read: Vec<bool>,
    written: Vec<bool>,
    compute: Option<String>,
    stores: usize,
}

impl<'k> Walk<'k> {
    /// The walk over the whole body of `k`.
    fn of(k: &'k LKernel) -> Walk<'k> {
        let mut w =
            Walk { k, read: vec![false; k.bufs.len()], written: vec![false; k.bufs.len()], compute: None, stores: 0 };
        w.stmts(&k.body);
        w
    }

    fn stmts(&mut self, body: &[LStmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, s: &LStmt) {
        s.kind.operands().into_iter().for_each(|e| self.expr(e));
        if let Some(i) = s.kind.instr() {
            let (reads, writes) = i.traffic(self.k);
            reads.into_iter().for_each(|b| self.mark_read(b));
            writes.into_iter().for_each(|b| self.write(b));
            if let Some(why) = i.computes(self.k) {
                self.computes(why);
            }
        }
        s.kind.bodies().into_iter().for_each(|b| self.stmts(b));
    }

    fn expr(&mut self, e: &LExpr) {
        e.walk(&mut |x| {
            if let LExpr::Load(b, _) = x {
                self.mark_read(*b);
            }
        });
    }

    fn mark_read(&mut self, b: LBufId) {
        if let Some(r) = self.read.get_mut(b.0 as usize) {
            *r = true;
        }
    }

    fn write(&mut self, b: LBufId) {
        self.stores += 1;
        if let Some(w) = self.written.get_mut(b.0 as usize) {
            *w = true;
        }
    }

    fn computes(&mut self, why: String) {
        self.compute.get_or_insert(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hir::BarrierKind;
    use crate::lir::{
        CacheHint, LBinOp, LBuf, LStmtKind, LVar, LVarId, MemOp, PackedOp, PairOp, PairSrc, Space, Special, SyncOp,
    };
    use crate::Span;

    /// A, B global f32[1024]; S shared f32[1024]; var 0 = tid.
    fn kernel(body: Vec<LStmtKind>) -> LKernel {
        LKernel {
            params: vec![LBufId(0), LBufId(1)],
            bufs: vec![
                LBuf::flat("A", DType::F32, Space::Global, 1024),
                LBuf::flat("B", DType::F32, Space::Global, 1024),
                LBuf::flat("S", DType::F32, Space::Shared, 1024),
            ],
            vars: vec![LVar { name: "tid".into(), dtype: DType::I32 }],
            body: body.into_iter().map(|k| LStmt::new(k, Span::default())).collect(),
            ..LKernel::new("k", [1, 1, 1], [32, 1, 1])
        }
    }

    fn tid() -> LExpr {
        LExpr::Var(LVarId(0))
    }
    fn load(b: u32) -> LExpr {
        LExpr::Load(LBufId(b), Box::new(tid()))
    }
    fn store(b: u32, value: LExpr) -> LStmtKind {
        LStmtKind::Memory(MemOp::Store { buf: LBufId(b), index: tid(), value })
    }
    fn let_tid() -> LStmtKind {
        LStmtKind::Let { var: LVarId(0), value: LExpr::Special(Special::ThreadIdx(0)) }
    }

    #[test]
    fn gmem_smem_round_trip_is_data_only_with_full_traffic() {
        let vcopy = |dst, src| {
            LStmtKind::Memory(MemOp::VecCopy {
                dst: LBufId(dst),
                dst_index: tid(),
                src: LBufId(src),
                src_index: tid(),
                lanes: 4,
                cache: CacheHint::Default,
            })
        };
        let k = kernel(vec![let_tid(), vcopy(2, 0), LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta)), vcopy(1, 2)]);
        let t = analyze(&k);
        assert!(t.data_only, "{t:?}");
        // Shared memory is not global traffic: A read 4 KiB, B written 4 KiB.
        assert_eq!((t.bytes_read, t.bytes_written), (4096, 4096));
        assert_eq!(t.memcpy_bytes(), 4096);
    }

    #[test]
    fn guarded_scalar_copy_with_fill_is_data_only() {
        let cond = LExpr::bin(LBinOp::Lt, tid(), LExpr::i32(1000));
        let sel = LExpr::Select(Box::new(cond.clone()), Box::new(load(0)), Box::new(LExpr::Float(0.0, DType::F32)));
        let guarded =
            LStmtKind::If { cond, then_body: vec![LStmt::new(store(1, load(0)), Span::default())], else_body: vec![] };
        let t = analyze(&kernel(vec![let_tid(), store(2, sel), guarded]));
        assert!(t.data_only, "{t:?}");
    }

    #[test]
    fn arithmetic_on_a_loaded_value_is_not_data_only() {
        let sqrt = LExpr::Math(crate::hir::MathFn::Sqrt, vec![load(0)]);
        let t = analyze(&kernel(vec![let_tid(), store(1, sqrt)]));
        assert!(!t.data_only);
        assert!(t.not_data_only_because.unwrap().contains("`B[...] = ...` stores a computed value"));
        let add = LExpr::bin(LBinOp::Add, load(0), LExpr::Float(1.0, DType::F32));
        assert!(!analyze(&kernel(vec![let_tid(), store(1, add)])).data_only);
    }

    #[test]
    fn constant_fill_and_converting_cast_are_not_copies() {
        let t = analyze(&kernel(vec![let_tid(), store(1, LExpr::Float(0.0, DType::F32))]));
        assert!(!t.data_only);
        assert_eq!(t.bytes_read, 0);
        let cast = LExpr::Cast(DType::F32, Box::new(LExpr::Cast(DType::F16, Box::new(load(0)))));
        assert!(!analyze(&kernel(vec![let_tid(), store(1, cast)])).data_only);
    }

    #[test]
    fn packed_math_is_not_data_only_and_no_store_moves_nothing() {
        let packed = LStmtKind::Pair(PairOp::Packed2 {
            op: PackedOp::Add,
            dtype: DType::F16,
            dst: LBufId(1),
            dst_index: tid(),
            srcs: vec![PairSrc::Buf(LBufId(0), tid()), PairSrc::Scalar(LExpr::Float(1.0, DType::F16))],
        });
        let t = analyze(&kernel(vec![let_tid(), packed]));
        assert!(!t.data_only);
        assert_eq!((t.bytes_read, t.bytes_written), (4096, 4096));
        let t = analyze(&kernel(vec![let_tid()]));
        assert!(!t.data_only);
        assert_eq!(t.not_data_only_because.as_deref(), Some("the kernel stores nothing"));
    }
}
