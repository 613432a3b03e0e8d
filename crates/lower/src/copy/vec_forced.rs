//! copy → `vec_16b`, `vec_32b`, `vec_64b`, `vec_128b`, `vec_256b` (forced
//! only, docs/tile-primitives.md §3.16).
//!
//! **Accepts**, only when `dispatch=` names it, a thread-scope copy whose two
//! regions are each exactly one vector of the width (2, 4, 8, 16 or 32 bytes:
//! a whole number of elements), between global, shared and local memory with
//! at least one side not local and not both in memory of the same kind
//! (`global ↔ shared`, `global ↔ local`, `shared ↔ local`; 32 bytes only
//! `global ↔ local`, and from sm_100), when each memory side is contiguous
//! and provably aligned to the width — its sliced layout is one `m` run of
//! stride 1, its offset and every value of its symbolic begin multiples of
//! the vector, inside one swizzle chunk — and the register side is one
//! contiguous run at a multiple of the vector. The config keys `cache="nc"`,
//! `l1_evict`, `l2_evict` and `prefetch_size` apply to the load from global
//! memory (else the variant declines: "requires src scope 'global'");
//! `l2_evict` only on 32-byte loads, which ptxas requires. The reference
//! proves no alignment (its emitter assumes it) and checks no contiguity.
//!
//! **Algorithm**: one PTX access per side (LIR `PtxVec`, docs/lir.md §2.9):
//! memory → registers is one `ld`, registers → memory one `st`, memory →
//! memory an `ld` into a register temporary named after the source and an
//! `st` from it. The memory index is the region's element offset through the
//! layout (symbolic begins as the one operand model resolves them), swizzled.
//!
//! **Generated code** (`Tx.copy(S[0:4], A[0:4], dispatch="vec_128b", cache="nc")`):
//! ```text
//! ld.global.nc.v4.u32 A_reg[0..+4] <- A[0]
//! st.shared.v4.u32 S[0] <- A_reg[0..+4]
//! ```
//! which CUDA prints as `asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" ...)`.

use super::call::CopyRule;
use super::call::{add_sym, operands, scope_pair, CopyOps};
use crate::affine::Affine;
use crate::lay;
use crate::operand::{self, thread_part};
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::{BufferRegion, ConfigKey, ConfigValue, MemScope};
use tirx_ir::lir::{ptx_instruction, LBufId, LExpr, LStmtKind, LoadHints, MemOp, PtxDir, PtxVec, Space};
use tirx_ir::op::{CacheMode, Family};
use tirx_ir::Arch;
use tirx_layout::{Axis, ExecScope, Swizzle, TileLayout};

/// One forced-width variant; [`WIDTHS`] are the registered ones.
pub struct VecForced {
    bytes: u32,
}

/// The registered widths in bytes (`vec_16b` … `vec_256b`).
pub const WIDTHS: [u32; 5] = [2, 4, 8, 16, 32];

impl VecForced {
    pub fn new(bytes: u32) -> VecForced {
        VecForced { bytes }
    }
}

const PAIRS: &[(MemScope, MemScope)] = &[
    (MemScope::Global, MemScope::Shared),
    (MemScope::Shared, MemScope::Global),
    (MemScope::Global, MemScope::Local),
    (MemScope::Local, MemScope::Global),
    (MemScope::Shared, MemScope::Local),
    (MemScope::Local, MemScope::Shared),
];
/// 256-bit accesses exist for global memory only.
const PAIRS_256: &[(MemScope, MemScope)] = &[(MemScope::Global, MemScope::Local), (MemScope::Local, MemScope::Global)];

/// One side of the copy, as `emit` addresses it.
enum Side {
    /// A global or shared region: element offset, symbolic begin, swizzle.
    Mem { offset: i64, sym: Affine, swizzle: Option<Swizzle> },
    /// A register region starting at this element.
    Reg { offset: i64 },
}

struct VecPlan {
    src: Side,
    dst: Side,
    hints: LoadHints,
}

impl Variant for VecForced {
    fn name(&self) -> &'static str {
        match self.bytes {
            2 => "vec_16b",
            4 => "vec_32b",
            8 => "vec_64b",
            16 => "vec_128b",
            _ => "vec_256b",
        }
    }
    fn priority(&self) -> u8 {
        20
    }
    fn family(&self) -> Family {
        Family::Copy
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[ConfigKey::Cache, ConfigKey::L1Evict, ConfigKey::L2Evict, ConfigKey::PrefetchSize]
    }
    fn min_arch(&self) -> Arch {
        if self.bytes == 32 {
            Arch::SM_100
        } else {
            Arch::MIN
        }
    }
    fn forced_only(&self) -> bool {
        true
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let kind = cx.scope.kind;
        if kind != ExecScope::Thread {
            return Err(Decline::new(CommonRule::ExecScope, format!("expected thread exec_scope, got {kind}")));
        }
        let ops = operands(cx)?;
        scope_pair(&ops, if self.bytes == 32 { PAIRS_256 } else { PAIRS })?;
        let dtype = ops.src_buf.dtype;
        let eb = dtype.bytes();
        if eb == 0 || !self.bytes.is_multiple_of(eb) {
            return Err(Decline::new(
                CommonRule::Dtype,
                format!("{} is not an integral number of {dtype} elements", self.name()),
            ));
        }
        let n = i64::from(self.bytes / eb);
        for (what, r) in [("src", ops.src), ("dst", ops.dst)] {
            if CopyOps::elems(r) != n {
                return Err(Decline::new(
                    CopyRule::RegionSize,
                    format!("{what} region does not contain exactly {n} elements"),
                ));
            }
        }
        let hints = hints(cx, self.bytes, ops.src_buf.scope)?;
        let plan = VecPlan { src: side(cx, ops.src, n, self.bytes)?, dst: side(cx, ops.dst, n, self.bytes)?, hints };
        let summary =
            format!("{}: one {}-B access per side, {n} × {dtype}", self.instructions(&plan, &ops), self.bytes);
        let mut p = Plan::new(summary, plan);
        p.vec = Some(n as u32);
        p.rounds = Some(1);
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<VecPlan>("copy/vec_forced")?;
        let ops = operands(cx)?;
        let src = index(em, ops.src, &p.src)?;
        let dst = index(em, ops.dst, &p.dst)?;
        let access = |dir, (mem, mem_index), (reg, reg_index)| {
            LStmtKind::Memory(MemOp::PtxVec(PtxVec { dir, mem, mem_index, reg, reg_index, bytes: self.bytes }))
        };
        match (&p.src, &p.dst) {
            (Side::Mem { .. }, Side::Reg { .. }) => em.push(access(PtxDir::Ld(p.hints), src, dst)),
            (Side::Reg { .. }, Side::Mem { .. }) => em.push(access(PtxDir::St, dst, src)),
            (Side::Mem { .. }, Side::Mem { .. }) => {
                let n = i64::from(self.bytes / ops.src_buf.dtype.bytes());
                let tmp = em.local_buf(&format!("{}_reg", ops.src_buf.name), ops.src_buf.dtype, n);
                em.push(access(PtxDir::Ld(p.hints), src, (tmp, LExpr::i32(0))));
                em.push(access(PtxDir::St, dst, (tmp, LExpr::i32(0))));
            }
            (Side::Reg { .. }, Side::Reg { .. }) => return Err(Bug("a register-to-register vector copy".into())),
        }
        Ok(())
    }
}

impl VecForced {
    /// The PTX the plan emits, for explain: `ld.global.nc.v4.u32 then st.shared.v4.u32 …`.
    fn instructions(&self, p: &VecPlan, ops: &CopyOps) -> String {
        let space = |s: MemScope| if s == MemScope::Global { Space::Global } else { Space::Shared };
        let ld = ptx_instruction(PtxDir::Ld(p.hints), space(ops.src_buf.scope), self.bytes);
        let st = ptx_instruction(PtxDir::St, space(ops.dst_buf.scope), self.bytes);
        match (&p.src, &p.dst) {
            (Side::Mem { .. }, Side::Mem { .. }) => format!("{ld} then {st} through a register temporary"),
            (Side::Mem { .. }, Side::Reg { .. }) => ld,
            _ => st,
        }
    }
}

/// The load hints of the call: they apply to a load from global memory only
/// (the reference's message), an L2 priority only to 256-bit loads (ptxas), a
/// prefetch size from sm_75.
fn hints(cx: &CallCx, bytes: u32, src: MemScope) -> Result<LoadHints, Decline> {
    let mut h = LoadHints::default();
    for e in &cx.call.config {
        match (e.key, e.value) {
            (ConfigKey::Cache, ConfigValue::Cache(CacheMode::NonCoherent)) => h.nc = true,
            (ConfigKey::L1Evict, ConfigValue::Evict(v)) => h.l1 = Some(v),
            (ConfigKey::L2Evict, ConfigValue::Evict(v)) => h.l2 = Some(v),
            (ConfigKey::PrefetchSize, ConfigValue::PrefetchSize(n)) => h.prefetch = Some(n),
            _ => {}
        }
    }
    if h.is_none() {
        return Ok(h);
    }
    if src != MemScope::Global {
        return Err(Decline::new(
            CommonRule::Config,
            format!(
                "cache/L1/L2 hint config applies to global loads; requires src scope 'global', got '{}'",
                src.name()
            ),
        ));
    }
    if let (Some(e), true) = (h.l2, bytes != 32) {
        return Err(Decline::new(
            CommonRule::Config,
            format!(
                "l2_evict=\"{}\" on a {bytes}-byte load: ptxas takes an L2 eviction priority on 256-bit loads only (vec_256b)",
                e.name()
            ),
        ));
    }
    Ok(h)
}

/// A region as one vector of `n` elements (`bytes` wide): contiguous and aligned.
fn side(cx: &CallCx, r: &BufferRegion, n: i64, bytes: u32) -> Result<Side, Decline> {
    let b = cx.buf(r.buf);
    if b.scope == MemScope::Local {
        let t = operand::register(cx, r).map_err(|m| Decline::new(CopyRule::RegisterLayout, m))?.tile;
        thread_part(&t, &b.name, ExecScope::Thread, 1, false).map_err(|m| Decline::new(CopyRule::RegisterLayout, m))?;
        contiguous(&t, n, &b.name)?;
        let offset = lay::m_offset(&t);
        aligned(offset, n, bytes, || format!("the registers of `{}` start at element {offset}", b.name))?;
        return Ok(Side::Reg { offset });
    }
    let m = operand::memory(cx, r)?;
    contiguous(&m.tile, n, &b.name)?;
    if let Some(sw) = m.swizzle.filter(|sw| sw.chunk() < n) {
        return Err(Decline::new(
            CopyRule::Swizzle,
            format!("`{}` is swizzled in chunks of {} elements; a vector of {n} would cross one", b.name, sw.chunk()),
        ));
    }
    let offset = lay::m_offset(&m.tile);
    aligned(offset, n, bytes, || format!("the region of `{}` starts at element {offset}", b.name))?;
    let step = m.sym.divisor();
    aligned(step, n, bytes, || format!("the symbolic begin of `{}` moves in steps of {step} elements", b.name))?;
    Ok(Side::Mem { offset, sym: m.sym, swizzle: m.swizzle })
}

/// The `n` elements are one run of consecutive addresses.
fn contiguous(t: &TileLayout, n: i64, name: &str) -> Result<(), Decline> {
    let iters: Vec<_> = t.shard.iter().filter(|i| i.extent != 1).collect();
    let ok = match iters[..] {
        [] => n == 1,
        [it] => it.axis == Axis::M && it.stride == 1 && it.extent == n,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(Decline::new(
        CommonRule::Layout,
        format!("the region of `{name}` is not {n} consecutive elements (sliced layout {t})"),
    ))
}

/// `x` elements is a multiple of the vector (0 counts: no offset).
fn aligned(x: i64, n: i64, bytes: u32, what: impl Fn() -> String) -> Result<(), Decline> {
    if x % n == 0 {
        return Ok(());
    }
    Err(Decline::new(CopyRule::Alignment, format!("{}: not aligned to the {bytes}-B vector", what())))
}

/// `(array, element index)` of a side.
fn index(em: &mut Emitter, r: &BufferRegion, s: &Side) -> Result<(LBufId, LExpr), Bug> {
    let (lb, ity) = em.lbuf(r.buf)?;
    match s {
        Side::Reg { offset } => Ok((lb, LExpr::Int(*offset, ity))),
        Side::Mem { offset, sym, swizzle } => {
            let idx = add_sym(em, LExpr::Int(*offset, ity), sym, ity)?;
            let idx = match swizzle {
                Some(sw) => crate::addr::swizzle(em.builder(), sw, idx),
                None => idx,
            };
            Ok((lb, idx))
        }
    }
}
