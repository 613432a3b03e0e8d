//! Copy variants (`Tx.<scope>.copy(dst, src)`), one module each:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`gmem_smem`] | 10 | global ↔ shared, all threads of the scope active, region divisible by the threads |
//! | [`gmem_smem_predicated`] | 5 | global ↔ shared when the region does not divide over the threads: all threads, widest aligned vector, guarded last round |
//! | [`ldstmatrix`] | 10 | shared ↔ 16-bit register fragments, warp-collective `ldmatrix`/`stmatrix` |
//! | [`reg`] | 10 | registers ↔ shared or global (one side local) |
//! | [`fallback`] | 0 | any valid copy without thread-distributed operands; one elected thread copies element by element (warns) |
//!
//! Shared helpers: [`partition`] (the `[outer, threads, vec]` split of
//! global ↔ shared copies) and [`swizzle_iter`] (the swizzle fast path).
//!
//! This module holds what they share: operand resolution, `validate_copy_op`
//! (with the region bounds of `crate::bounds`),
//! the memory-pair predicate, the split of region begins into a sliced
//! constant and a symbolic element offset, and the vector-width candidates.

pub mod fallback;
pub mod gmem_smem;
pub mod gmem_smem_predicated;
pub mod ldstmatrix;
pub mod partition;
pub mod reg;
pub mod swizzle_iter;

use crate::dispatch::{CallCx, Decline, Emitter, Registry, Rule};
use crate::expr::Affine;
use tirx_ir::hir::{Buffer, BufferRegion, Expr, MemScope, Range};
use tirx_ir::lir::{LExpr, LStmt, LStmtKind};
use tirx_ir::DType;
use tirx_layout::ExecScope;

/// The scopes whose threads can cooperate on one call (clusters cannot, yet).
pub const ANY_SCOPE: &[ExecScope] = &[ExecScope::Thread, ExecScope::Warp, ExecScope::Warpgroup, ExecScope::Cta];

pub fn register(r: &mut Registry) {
    r.register(Box::new(gmem_smem::GmemSmem));
    r.register(Box::new(gmem_smem_predicated::GmemSmemPredicated));
    r.register(Box::new(ldstmatrix::LdStMatrix));
    r.register(Box::new(fallback::Fallback));
    r.register(Box::new(reg::RegCopy));
}

/// The two operands of a copy.
pub struct CopyOps<'a> {
    pub dst: &'a BufferRegion,
    pub src: &'a BufferRegion,
    pub dst_buf: &'a Buffer,
    pub src_buf: &'a Buffer,
}

impl CopyOps<'_> {
    /// Non-unit extents of a region (what must match between the two sides).
    pub fn non_unit(r: &BufferRegion) -> Vec<i64> {
        r.ranges.iter().map(|g| g.extent).filter(|&e| e != 1).collect()
    }
    pub fn elems(r: &BufferRegion) -> i64 {
        r.ranges.iter().fold(1i64, |a, g| a.saturating_mul(g.extent))
    }
}

/// `dst`/`src` as regions, checked by `validate_copy_op` (§3.1): same dtype,
/// equal non-unit extents, constant parts of the region inside the buffer.
pub fn operands<'a>(cx: &CallCx<'a>) -> Result<CopyOps<'a>, Decline> {
    let (Some(dst), Some(src)) = (cx.region(0), cx.region(1)) else {
        return Err(Decline::new(Rule::ValidateCopyOp, "copy needs two buffer regions (dst, src)"));
    };
    let ops = CopyOps { dst, src, dst_buf: cx.buf(dst.buf), src_buf: cx.buf(src.buf) };
    if ops.dst_buf.dtype != ops.src_buf.dtype {
        return Err(Decline::new(
            Rule::ValidateCopyOp,
            format!(
                "dtype mismatch: src `{}` is {}, dst `{}` is {}",
                ops.src_buf.name, ops.src_buf.dtype, ops.dst_buf.name, ops.dst_buf.dtype
            ),
        ));
    }
    let (de, se) = (CopyOps::non_unit(dst), CopyOps::non_unit(src));
    if de != se {
        return Err(Decline::new(Rule::ValidateCopyOp, format!("dst region shape {de:?} != src region shape {se:?}")));
    }
    for (r, b) in [(dst, ops.dst_buf), (src, ops.src_buf)] {
        check_in_bounds(cx, r, b)?;
        check_uniform(cx, r, b)?;
    }
    Ok(ops)
}

/// Every region dim lies inside its buffer dim, by the verdict of
/// [`crate::bounds::region`] (the statement lowering checks every call's
/// regions before dispatch, so a provably outside one never gets here unless
/// [`crate::LowerOptions::defer_bounds`] lets it through); a region not
/// proven inside is left to the variants (and the simulator's check).
fn check_in_bounds(cx: &CallCx, r: &BufferRegion, b: &Buffer) -> Result<(), Decline> {
    if r.ranges.len() != b.shape.len() {
        return Err(Decline::new(
            Rule::ValidateCopyOp,
            format!("`{}` has {} dims, the region {}", b.name, b.shape.len(), r.ranges.len()),
        ));
    }
    match crate::bounds::region(cx.kernel, cx.env, cx.facts, r) {
        crate::bounds::Verdict::Outside(e) if !cx.opts.defer_bounds => {
            let write = cx.region(0).is_some_and(|dst| std::ptr::eq(dst, r));
            Err(Decline::new(Rule::ValidateCopyOp, e.reason(&b.name, write)))
        }
        _ => Ok(()),
    }
}

/// The affine begin of dim `d` of a region of `b`, in loop variables and scope ids.
fn affine_begin(cx: &CallCx, b: &Buffer, d: usize, begin: &Expr) -> Result<Affine, Decline> {
    cx.affine(begin).ok_or_else(|| {
        Decline::new(
            Rule::SymbolicBegin,
            format!(
                "dim {d} of `{}` begins at `{}`, which is not affine in loop variables and scope ids (`//` and `%` by constants allowed)",
                b.name,
                crate::explain::top_text(cx.kernel, begin)
            ),
        )
    })
}

/// A region begin split for slicing: the constant `base` the layout is
/// sliced at, and the symbolic rest `begin - base` (in index units; zero for
/// a constant begin). `base` is the begin's constant clamped into the
/// buffer dim, so a begin like `(w - 1) * 32` slices at 0 with rest `32·w - 32`.
fn split_begin(cx: &CallCx, b: &Buffer, d: usize, rg: &Range) -> Result<(i64, Affine), Decline> {
    let a = affine_begin(cx, b, d, &rg.begin)?;
    if a.is_constant() {
        return Ok((a.constant, Affine::default()));
    }
    let n = b.shape.get(d).copied().unwrap_or(0);
    let base = a.constant.clamp(0, n.saturating_sub(rg.extent).max(0));
    let rest = a.minus(Affine::constant(base)).ok_or_else(|| overflow(b, d))?;
    Ok((base, rest))
}

fn overflow(b: &Buffer, d: usize) -> Decline {
    Decline::new(
        Rule::SymbolicBegin,
        format!("dim {d} of `{}`: the symbolic begin's element offset overflows i64", b.name),
    )
}

/// Adds `rest`, the symbolic part of a begin on dim `d` of `b` whose layout
/// stride is `stride`, to the element offset `sym`.
fn push_sym(sym: &mut Affine, rest: &Affine, stride: i64, b: &Buffer, d: usize) -> Result<(), Decline> {
    let step = rest.clone().scale(stride).ok_or_else(|| overflow(b, d))?;
    *sym = std::mem::take(sym).plus(step).ok_or_else(|| overflow(b, d))?;
    Ok(())
}

/// `off` plus the symbolic element offset `sym`, in index type `ity`.
fn add_sym(em: &mut Emitter, off: LExpr, sym: &Affine, ity: DType) -> Result<LExpr, Decline> {
    sym.add_to(off, em.env, em.builder(), ity)
        .ok_or_else(|| Decline::new(Rule::SymbolicBegin, "a region begin uses a variable not defined here"))
}

/// `e` as a per-thread `let` named `name` appended to `out`, unless it is
/// already a variable or a constant.
fn bind(em: &mut Emitter, out: &mut Vec<LStmt>, name: &str, e: LExpr) -> LExpr {
    if matches!(e, LExpr::Var(_) | LExpr::Int(..)) {
        return e;
    }
    let t = em.builder().ity(&e);
    let range = em.builder().bounds(&e);
    let v = em.var(name, t, range);
    out.push(LStmt::new(LStmtKind::Let { var: v, value: e }, em.span));
    LExpr::Var(v)
}

/// The threads of one instance must agree on the region (a cooperative copy
/// of a lane-dependent region has no single meaning).
fn check_uniform(cx: &CallCx, r: &BufferRegion, b: &Buffer) -> Result<(), Decline> {
    for (d, rg) in r.ranges.iter().enumerate() {
        if cx.env.varies_within(cx.kernel, &rg.begin, cx.scope.kind) {
            return Err(Decline::new(
                Rule::UniformRegion,
                format!(
                    "dim {d} of `{}` begins at `{}`, which differs between the threads of one {} instance",
                    b.name,
                    crate::explain::top_text(cx.kernel, &rg.begin),
                    cx.scope.kind
                ),
            ));
        }
    }
    Ok(())
}

/// `src -> dst` memory scopes must be one of `allowed`.
pub fn scope_pair(ops: &CopyOps, allowed: &[(MemScope, MemScope)]) -> Result<(), Decline> {
    let norm = |s: MemScope| if s.is_shared() { MemScope::Shared } else { s };
    let pair = (norm(ops.src_buf.scope), norm(ops.dst_buf.scope));
    if allowed.contains(&pair) {
        return Ok(());
    }
    let list: Vec<String> = allowed.iter().map(|(a, b)| format!("{}->{}", a.name(), b.name())).collect();
    Err(Decline::new(
        Rule::ScopeAllowed,
        format!(
            "unsupported memory scopes src={} dst={}; allowed: {}",
            ops.src_buf.scope.name(),
            ops.dst_buf.scope.name(),
            list.join(", ")
        ),
    ))
}

/// Vector widths to try, widest first: 128/64/32/16/8-bit groups of elements, then 1.
pub fn vec_candidates(elem_bits: u32) -> Vec<i64> {
    let mut v: Vec<i64> = Vec::new();
    for bits in [128u32, 64, 32, 16, 8] {
        if bits >= elem_bits && bits % elem_bits == 0 {
            let n = (bits / elem_bits) as i64;
            if !v.contains(&n) {
                v.push(n);
            }
        }
    }
    if !v.contains(&1) {
        v.push(1);
    }
    v
}
