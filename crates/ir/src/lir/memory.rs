//! The **memory** family: scalar element stores (`buf[i] = v`; loads are the
//! expression `LExpr::Load`), vector copies (`VecCopy`: `lanes` consecutive
//! elements as one access on each side) and PTX vector loads and stores
//! between registers and memory with their qualifiers spelled out
//! ([`PtxVec`]: `ld.global.nc.L1::no_allocate.v4.u32`). See `docs/lir.md` §2.2, §2.9.
//!
//! Typing: a store's value has the buffer's dtype; a vector copy moves elements of
//! one dtype, `lanes × bits ∈ {8, 16, 32, 64, 128}`, and constant indices are
//! multiples of `lanes` (every array is 16-byte aligned, so the access is then
//! naturally aligned); `.nc` reads only global memory. A PTX vector access: one
//! local and one global or shared array of one dtype, 2, 4, 8, 16 or 32 bytes
//! of whole elements, constant indices multiples of the elements it moves;
//! hints only on loads from global memory, an L2 eviction priority and 32
//! bytes only there (32 bytes: sm_100, global only).

use super::check::{Check, Checker};
use super::instr::{Accesses, Instr};
use super::print::Printer;
use super::{LBufId, LExpr, LKernel, LVarId, Space};
use crate::dtype::DType;
pub use crate::hir::AtomicOp;
use crate::op::Evict;
use crate::target::Arch;
use serde::Serialize;

/// Cache hint of a global load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum CacheHint {
    #[default]
    Default,
    /// `ld.global.nc` (read-only path).
    NonCoherent,
}

/// An instruction of the memory family.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum MemOp {
    /// Scalar element store `buf[index] = value`.
    Store { buf: LBufId, index: LExpr, value: LExpr },
    /// `dst[dst_index .. +lanes] = src[src_index .. +lanes]` as one vector access on each side.
    VecCopy { dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, lanes: u32, cache: CacheHint },
    /// One inline-PTX `ld`/`st` between registers and memory (docs/lir.md §2.9).
    PtxVec(PtxVec),
    /// `old = atomicAdd(&buf[index], value)`: an atomic read-modify-write of one element of a
    /// global or shared integer buffer, relaxed at the GPU's scope; `old`, when declared, the
    /// element's value before (docs/lir.md §2.2).
    Atomic { op: AtomicOp, buf: LBufId, index: LExpr, value: LExpr, old: Option<LVarId> },
}

/// The element types of [`MemOp::Atomic`]: the integer widths `atomicAdd` has.
pub const ATOMIC_TYPES: [DType; 3] = [DType::I32, DType::U32, DType::U64];

impl Instr for MemOp {
    fn name(&self) -> String {
        match self {
            MemOp::Store { .. } => "store".into(),
            MemOp::VecCopy { lanes, .. } => format!("vcopy<{lanes}>"),
            MemOp::PtxVec(p) => if matches!(p.dir, PtxDir::St) { "st" } else { "ld" }.into(),
            MemOp::Atomic { op, .. } => format!("atom.{}", op.name()),
        }
    }

    fn min_arch(&self, _: &dyn Fn(LBufId) -> DType) -> Arch {
        match self {
            MemOp::PtxVec(p) => p.min_arch(),
            MemOp::Store { .. } | MemOp::VecCopy { .. } | MemOp::Atomic { .. } => Arch::MIN,
        }
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            MemOp::Store { index, value, .. } => vec![index, value],
            MemOp::VecCopy { dst_index, src_index, .. } => vec![dst_index, src_index],
            MemOp::PtxVec(p) => vec![&p.mem_index, &p.reg_index],
            MemOp::Atomic { index, value, .. } => vec![index, value],
        }
    }

    fn accesses(&self) -> Accesses {
        match self {
            MemOp::Store { buf, .. } => (vec![], vec![*buf]),
            MemOp::VecCopy { dst, src, .. } => (vec![*src], vec![*dst]),
            MemOp::PtxVec(p) => p.accesses(),
            MemOp::Atomic { buf, .. } => (vec![*buf], vec![*buf]),
        }
    }

    /// A store computes unless its value is a loaded value passed through unchanged
    /// (the traffic count's "data-only", [`moved_value`]); copies never do.
    fn computes(&self, k: &LKernel) -> Option<String> {
        match self {
            MemOp::Store { buf, value, .. } if !moved_value(k, value, k.buf(*buf).dtype) => {
                Some(format!("`{}[...] = ...` stores a computed value", k.buf(*buf).name))
            }
            MemOp::Atomic { op, buf, .. } => Some(format!("`atom.{}` updates `{}`", op.name(), k.buf(*buf).name)),
            _ => None,
        }
    }

    fn defines(&self) -> Option<LVarId> {
        match self {
            MemOp::Atomic { old, .. } => *old,
            _ => None,
        }
    }

    fn check(&self, c: &mut Checker) -> Check {
        match self {
            MemOp::Store { buf, index, value } => c.store(*buf, index, value),
            MemOp::Atomic { buf, index, value, old, .. } => c.atomic(*buf, index, value, *old),
            MemOp::VecCopy { dst, dst_index, src, src_index, lanes, cache } => {
                c.vec_copy((*dst, dst_index), (*src, src_index), *lanes, *cache)
            }
            MemOp::PtxVec(p) => c.ptx_vec(p),
        }
    }

    fn print(&self, p: &Printer) -> String {
        match self {
            MemOp::Store { buf, index, value } => p.store(*buf, index, value),
            MemOp::VecCopy { dst, dst_index, src, src_index, lanes, cache } => {
                p.vec_copy((*dst, dst_index), (*src, src_index), *lanes, *cache)
            }
            MemOp::PtxVec(v) => p.ptx_vec(v),
            MemOp::Atomic { op, buf, index, value, old } => {
                let call = format!("atom.{} {}, {}", op.name(), p.at(*buf, index), p.e(value));
                match old {
                    Some(v) => format!("let {} = {call}", p.var_name(*v)),
                    None => call,
                }
            }
        }
    }
}

/// A loaded value passed through unchanged into an element of `dtype`: a load of
/// that type, a same-type cast of one, or a select among such values and literals
/// (a guarded copy with a fill value).
pub fn moved_value(k: &LKernel, e: &LExpr, dtype: DType) -> bool {
    let literal = |e: &LExpr| matches!(e, LExpr::Int(..) | LExpr::Float(..) | LExpr::Bool(_));
    match e {
        LExpr::Load(b, _) => k.buf(*b).dtype == dtype,
        LExpr::Cast(t, a) => *t == dtype && moved_value(k, a, dtype),
        LExpr::Select(_, a, b) => {
            let ok = |x: &LExpr| moved_value(k, x, dtype) || literal(x);
            ok(a) && ok(b) && !(literal(a) && literal(b))
        }
        _ => false,
    }
}

impl Checker<'_> {
    fn atomic(&mut self, buf: LBufId, index: &LExpr, value: &LExpr, old: Option<LVarId>) -> Check {
        let b = self.buf(buf)?;
        self.index(buf, index)?;
        if b.space == Space::Local {
            return Err(format!("atomic on `{}`, a local buffer", b.name));
        }
        if !ATOMIC_TYPES.contains(&b.dtype) {
            return Err(format!("atomic on `{}` of {}; atomics take int32, uint32 or uint64", b.name, b.dtype));
        }
        let t = self.expr(value)?;
        if t != b.dtype {
            return Err(format!("atomic of a {t} value on {} buffer `{}`", b.dtype, b.name));
        }
        if let Some(v) = old {
            let v = self.var(v)?;
            if v.dtype != b.dtype {
                return Err(format!("atomic on {} buffer `{}` returns into {} `{}`", b.dtype, b.name, v.dtype, v.name));
            }
        }
        Ok(())
    }

    fn store(&mut self, buf: LBufId, index: &LExpr, value: &LExpr) -> Check {
        let b = self.buf(buf)?;
        self.index(buf, index)?;
        let t = self.expr(value)?;
        if t != b.dtype {
            return Err(format!("store of a {t} value into {} buffer `{}`", b.dtype, b.name));
        }
        Ok(())
    }

    fn vec_copy(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        lanes: u32,
        cache: CacheHint,
    ) -> Check {
        let (d, sb) = (self.buf(dst)?, self.buf(src)?);
        self.index(dst, dst_index)?;
        self.index(src, src_index)?;
        if d.dtype != sb.dtype {
            return Err(format!("vector copy `{}` <- `{}` mixes {} and {}", d.name, sb.name, d.dtype, sb.dtype));
        }
        let bits = lanes * d.dtype.bits();
        if !matches!(bits, 8 | 16 | 32 | 64 | 128) {
            return Err(format!("vector copy of {lanes} x {} is {bits} bits; need 8, 16, 32, 64 or 128", d.dtype));
        }
        let what = format!("vector copy of {lanes} lanes");
        self.aligned(dst, dst_index, i64::from(lanes), &what)?;
        self.aligned(src, src_index, i64::from(lanes), &what)?;
        if cache == CacheHint::NonCoherent && sb.space != Space::Global {
            return Err(format!("non-coherent load from `{}`, which is not global memory", sb.name));
        }
        Ok(())
    }
}

impl Printer<'_> {
    fn store(&self, buf: LBufId, index: &LExpr, value: &LExpr) -> String {
        format!("{} = {}", self.at(buf, index), self.e(value))
    }

    /// `vcopy<4>.nc S[i] <- A[j]`.
    fn vec_copy(
        &self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        lanes: u32,
        cache: CacheHint,
    ) -> String {
        let nc = if cache == CacheHint::NonCoherent { ".nc" } else { "" };
        format!("vcopy<{lanes}>{nc} {} <- {}", self.at(dst, dst_index), self.at(src, src_index))
    }
}

/// One PTX `ld` or `st` of a vector between registers and memory, printed as
/// inline PTX with exactly its qualifiers (docs/lir.md §2.9): the forced-width
/// copies `vec_16b` … `vec_256b` (docs/tile-primitives.md §3.16).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PtxVec {
    /// `ld` (memory → registers, with its hints) or `st` (registers → memory).
    pub dir: PtxDir,
    /// The global or shared array and the element index of the vector's first element.
    pub mem: LBufId,
    pub mem_index: LExpr,
    /// The local array the registers are, and the index of the first element.
    pub reg: LBufId,
    pub reg_index: LExpr,
    /// 2, 4, 8, 16 or 32 ([`ptx_form`]).
    pub bytes: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PtxDir {
    Ld(LoadHints),
    St,
}

/// The cache qualifiers of a global load; the simulator treats them as no-ops
/// (`nc` keeps its read-only check).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct LoadHints {
    /// `.nc`: the non-coherent (read-only) path.
    pub nc: bool,
    /// `.L1::<priority>`.
    pub l1: Option<Evict>,
    /// `.L2::<priority>` (ptxas takes it on 256-bit loads only).
    pub l2: Option<Evict>,
    /// `.L2::<n>B` prefetch: 64, 128 or 256.
    pub prefetch: Option<u32>,
}

impl LoadHints {
    pub fn is_none(&self) -> bool {
        *self == LoadHints::default()
    }
}

/// `(type tail, registers, register bits)` of a `bytes`-wide access: 16-bit
/// accesses use one `.u16` register, wider ones 32-bit words (`v4.u32`).
pub fn ptx_form(bytes: u32) -> Option<(&'static str, u32, u32)> {
    Some(match bytes {
        2 => ("u16", 1, 16),
        4 => ("u32", 1, 32),
        8 => ("v2.u32", 2, 32),
        16 => ("v4.u32", 4, 32),
        32 => ("v8.u32", 8, 32),
        _ => return None,
    })
}

/// A `bytes`-wide access of `space` memory as PTX spells it, qualifiers in the
/// ISA's order: `ld.global.nc.L1::no_allocate.L2::evict_first.L2::256B.v8.u32`,
/// `st.shared.v4.u32`.
pub fn ptx_instruction(dir: PtxDir, space: Space, bytes: u32) -> String {
    let tail = ptx_form(bytes).map_or("?", |f| f.0);
    let space = match space {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::Local => "local",
    };
    let mut parts = vec![];
    match dir {
        PtxDir::St => parts.extend(["st".to_string(), space.to_string()]),
        PtxDir::Ld(h) => {
            parts.extend(["ld".to_string(), space.to_string()]);
            if h.nc {
                parts.push("nc".into());
            }
            parts.extend(h.l1.map(|e| format!("L1::{}", e.name())));
            parts.extend(h.l2.map(|e| format!("L2::{}", e.name())));
            parts.extend(h.prefetch.map(|n| format!("L2::{n}B")));
        }
    }
    parts.push(tail.to_string());
    parts.join(".")
}

impl PtxVec {
    /// The instruction, given the space of the memory array ([`ptx_instruction`]).
    pub fn instruction(&self, space: Space) -> String {
        ptx_instruction(self.dir, space, self.bytes)
    }

    /// The oldest target: 256-bit accesses are sm_100; the rest (an L2 prefetch
    /// size, sm_75, included) every target.
    pub fn min_arch(&self) -> Arch {
        if self.bytes == 32 {
            Arch::SM_100
        } else {
            Arch::MIN
        }
    }

    /// `(read, written)` buffers.
    pub fn accesses(&self) -> (Vec<LBufId>, Vec<LBufId>) {
        match self.dir {
            PtxDir::Ld(_) => (vec![self.mem], vec![self.reg]),
            PtxDir::St => (vec![self.reg], vec![self.mem]),
        }
    }

    /// Elements of `t` one access moves, when `bytes` holds a whole number of them.
    pub fn elems(&self, t: DType) -> Option<u32> {
        let b = t.bytes();
        (b > 0 && self.bytes.is_multiple_of(b)).then(|| self.bytes / b)
    }
}

impl Checker<'_> {
    fn ptx_vec(&mut self, p: &PtxVec) -> Check {
        let (m, r) = (self.buf(p.mem)?, self.buf(p.reg)?);
        self.index(p.mem, &p.mem_index)?;
        self.index(p.reg, &p.reg_index)?;
        let op = if matches!(p.dir, PtxDir::St) { "st" } else { "ld" };
        if r.space != Space::Local || m.space == Space::Local {
            return Err(format!(
                "{op} `{}` <-> `{}`: one side must be local, the other global or shared",
                m.name, r.name
            ));
        }
        if m.dtype != r.dtype {
            return Err(format!("{op} between `{}` ({}) and `{}` ({})", m.name, m.dtype, r.name, r.dtype));
        }
        if ptx_form(p.bytes).is_none() {
            return Err(format!("{op} of {} bytes; need 2, 4, 8, 16 or 32", p.bytes));
        }
        let Some(n) = p.elems(m.dtype) else {
            return Err(format!("{op} of {} bytes is not a whole number of {} elements", p.bytes, m.dtype));
        };
        let what = format!("{op} of {} bytes", p.bytes);
        self.aligned(p.mem, &p.mem_index, i64::from(n), &what)?;
        self.aligned(p.reg, &p.reg_index, i64::from(n), &what)?;
        if p.bytes == 32 && m.space != Space::Global {
            return Err(format!("256-bit {op} of `{}`: only global memory has 256-bit accesses", m.name));
        }
        match p.dir {
            PtxDir::Ld(h) if !h.is_none() && m.space != Space::Global => {
                Err(format!("cache hints on a load from `{}`, which is not global memory", m.name))
            }
            PtxDir::Ld(LoadHints { l2: Some(e), .. }) if p.bytes != 32 || !e.at_l2() => Err(format!(
                "L2 eviction priority `{}` on a {}-byte load; ptxas takes it on 256-bit loads",
                e.name(),
                p.bytes
            )),
            PtxDir::Ld(LoadHints { prefetch: Some(n), .. }) if !matches!(n, 64 | 128 | 256) => {
                Err(format!("prefetch size {n}; need 64, 128 or 256"))
            }
            _ => Ok(()),
        }
    }
}

impl Printer<'_> {
    /// `ld.global.nc.v4.u32 R[0..+4] <- A[i]`, `st.shared.v4.u32 S[i] <- R[0..+4]`.
    fn ptx_vec(&self, p: &PtxVec) -> String {
        // Printing never panics: a bad id prints as `buf#N` (the checker reports it).
        let (space, dtype) =
            self.k.bufs.get(p.mem.0 as usize).map_or((Space::Global, DType::U8), |m| (m.space, m.dtype));
        let n = p.elems(dtype).unwrap_or(1);
        let reg = self.at(p.reg, &p.reg_index);
        let reg = format!("{}..+{n}]", reg.strip_suffix(']').unwrap_or(&reg));
        let mem = self.at(p.mem, &p.mem_index);
        match p.dir {
            PtxDir::Ld(_) => format!("{} {reg} <- {mem}", p.instruction(space)),
            PtxDir::St => format!("{} {mem} <- {reg}", p.instruction(space)),
        }
    }
}
