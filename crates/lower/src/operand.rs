//! One operand model for every variant (`docs/tile-primitives.md` §3.1): a
//! tile call's region resolved once into what lowering needs of it.
//!
//! * [`MemOperand`] — a region of a global or shared buffer: the buffer's layout
//!   (the swizzle's base tile for a `ComposeLayout`) sliced at the constant part
//!   of the region's begins and canonicalized, the swizzle, and the symbolic
//!   rest of the begins as one affine element offset (`sym`). Its alignment
//!   facts: the tile's strides and offset, `sym_div` (the divisor of `sym`, with the
//!   parameters' `T.assume` divisibility) and the swizzle chunk.
//! * [`RegOperand`] — a region of a register (`local`) buffer: the layout sliced
//!   and canonicalized with its thread axes, checked to hold each element in one
//!   register; [`thread_part`] then says which thread id numbers it at a scope.
//!
//! Variants read these and never slice layouts themselves, so every variant
//! agrees on what a region addresses. Errors are the variant's to type: memory
//! operands decline with their own rules, register operands return a message
//! the variant files under its rule (`register_layout`, `fragment`).

use crate::affine::Affine;
use crate::scope::TidKind;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter};
use tirx_ir::hir::{BufId, Buffer, BufferRegion, Expr, Range};
use tirx_ir::lir::{LBufId, LExpr};
use tirx_ir::DType;
use tirx_layout::{Axis, ExecScope, Fusion, Iter, Layout, Swizzle, TileLayout};

/// Register bundles up to this many elements per thread are fully unrolled
/// (constant register indices keep them in registers).
pub const UNROLL_ELEMS: i64 = 256;

/// A region of a global or shared buffer (owned, so plans can keep it).
#[derive(Clone, Debug)]
pub struct MemOperand {
    pub buf: BufId,
    /// The layout sliced to the region at the constant part of its begins, canonical.
    pub tile: TileLayout,
    /// The swizzle of a `ComposeLayout` (an identity swizzle is none).
    pub swizzle: Option<Swizzle>,
    /// The symbolic part of the region start, in elements (zero when constant).
    pub sym: Affine,
    /// What every value of `sym` is a multiple of (alignment proofs): its divisor,
    /// with the divisibility `T.assume` states of scalar parameters (`CallCx::divisor`).
    pub sym_div: i64,
    /// The element stride of each buffer dim when every dim is one stride (a dim of size 1:
    /// the row-major one); what a guarded copy reads its coordinates back from.
    pub dim_strides: Option<Vec<i64>>,
}

impl MemOperand {
    /// Whether the region is one dense row-major chain: every non-unit iter is a single
    /// stride-1 memory iter (what a bulk copy or a TMA box moves in one run).
    pub fn is_dense_chain(&self) -> bool {
        let dense = self.tile.shard.iter().filter(|i| i.extent != 1).collect::<Vec<_>>();
        matches!(dense[..], [] | [Iter { stride: 1, axis: Axis::M, .. }])
    }

    /// The flat array and the start index of the region: the layout's element offset
    /// plus the symbolic begin.
    pub fn start(&self, em: &mut Emitter) -> Result<(LBufId, LExpr), Bug> {
        let (buf, _) = em.lbuf(self.buf)?;
        let s = LExpr::i32(crate::lay::m_offset(&self.tile));
        let s = self
            .sym
            .add_to(s, &|v| em.env.var(v), em.builder(), DType::I32)
            .ok_or_else(|| Bug("the region's begin uses a variable not defined here".into()))?;
        Ok((buf, s))
    }
}

/// Resolves a global or shared region (§2.8): no thread axes, one address per
/// element, each symbolic begin on a dim the layout keeps as one `m` iter.
pub fn memory(cx: &CallCx, r: &BufferRegion) -> Result<MemOperand, Decline> {
    let b = cx.buf(r.buf);
    let lerr = |e: tirx_layout::LayoutError| Decline::new(CommonRule::Slice, format!("`{}`: {e}", b.name));
    let (base, swizzle) = match &b.layout {
        Layout::Tile(t) => (t.clone(), None),
        Layout::Compose(c) => (c.base_tile(&b.shape).map_err(lerr)?, Some(c.swizzle).filter(|s| s.swizzle_len > 0)),
    };
    if !base.thread_axes().is_empty() {
        return Err(Decline::new(
            CommonRule::Layout,
            format!("`{}` is in {} memory but its layout has thread axes", b.name, b.scope.name()),
        ));
    }
    let (grouped, seps) = base.canonicalize(Fusion::Cuda).and_then(|c| c.group(&b.shape)).map_err(lerr)?;
    let mut region = Vec::with_capacity(r.ranges.len());
    let mut sym = Affine::default();
    for (d, rg) in r.ranges.iter().enumerate() {
        let (begin, rest) = split_begin(cx, b, d, rg)?;
        if rest.is_zero() {
            region.push((begin, rg.extent));
            continue;
        }
        let group = &grouped.shard[seps[d]..seps[d + 1]];
        if let Some(stride) = dim_stride(group) {
            region.push((begin, rg.extent));
            push_sym(&mut sym, &rest, stride, b, d)?;
            continue;
        }
        // A dim split over several iters: the whole begin goes through its digits.
        let whole = rest.plus(Affine::constant(begin)).ok_or_else(|| overflow(b, d))?;
        let digits = split_dim_offset(group, &whole, rg.extent).ok_or_else(|| {
            Decline::new(
                CommonRule::SymbolicBegin,
                format!(
                    "dim {d} of `{}` has a symbolic begin but its layout splits the dim into several iters, and the \
                     region is not provably inside one run of the innermost iter (its extent {} must divide that \
                     iter's extent and every value of the begin)",
                    b.name, rg.extent
                ),
            )
        })?;
        region.push((0, rg.extent));
        sym = sym.plus(digits).ok_or_else(|| overflow(b, d))?;
    }
    let dim_strides: Option<Vec<i64>> = (0..b.shape.len())
        .map(|d| {
            // A dim of size 1 has no stride; only its coordinate 0 is ever accessed, so any
            // stride is right: the row-major one keeps the vectors of a 1-wide row contiguous.
            dim_stride(&grouped.shard[seps[d]..seps[d + 1]]).map(|s| {
                if s == 0 {
                    b.shape[d + 1..].iter().product()
                } else {
                    s
                }
            })
        })
        .collect();
    let leaves = region.iter().zip(&b.shape).any(|(&(lo, e), &n)| lo < 0 || lo.saturating_add(e) > n);
    let tile = if leaves && crate::bounds::clipped(cx.call, b) {
        past_the_end(crate::lay::m_offset(&grouped), dim_strides.as_deref(), &region, b)?
    } else {
        base.slice(&b.shape, &region, Fusion::Cuda)
    };
    let tile = tile.and_then(|s| s.canonicalize(Fusion::Cuda)).map_err(lerr)?;
    if !tile.replica.is_empty() {
        return Err(Decline::new(
            CommonRule::Layout,
            format!("`{}` has replicated elements ({tile}); an access needs one address per element", b.name),
        ));
    }
    let sym_div = cx.divisor(&sym);
    Ok(MemOperand { buf: r.buf, tile, swizzle, sym, sym_div, dim_strides })
}

/// The tile of a `clip=True` region that leaves its buffer: each dim one iter of the
/// buffer's stride for that dim, run past the end (the copy guards every element, so
/// only the addresses inside are used). Dims split over several iters cannot be extended.
fn past_the_end(
    base: i64,
    strides: Option<&[i64]>,
    region: &[(i64, i64)],
    b: &Buffer,
) -> Result<Result<TileLayout, tirx_layout::LayoutError>, Decline> {
    let Some(strides) = strides else {
        return Err(Decline::new(
            CommonRule::Slice,
            format!(
                "`{}`: the region leaves the buffer and a dim's layout splits it over several iters; \
                 `clip=True` extends dims of one stride",
                b.name
            ),
        ));
    };
    let mut shard = Vec::with_capacity(region.len());
    let mut offset = base;
    for (d, (&(lo, e), &stride)) in region.iter().zip(strides).enumerate() {
        offset =
            offset.checked_add(lo.checked_mul(stride).ok_or_else(|| overflow(b, d))?).ok_or_else(|| overflow(b, d))?;
        shard.push(Iter::m(e, stride));
    }
    let offsets = [(tirx_layout::Axis::M, offset)].into_iter().collect();
    Ok(Ok(TileLayout::new(shard, vec![], offsets)))
}

/// The element stride of a dim whose iters (after dropping unit ones) are one
/// `m` iter; 0 for a dim of extent 1.
fn dim_stride(group: &[Iter]) -> Option<i64> {
    let iters: Vec<&Iter> = group.iter().filter(|i| i.extent != 1).collect();
    match iters[..] {
        [] => Some(0),
        [it] if it.axis == Axis::M => Some(it.stride),
        _ => None,
    }
}

/// The element offset of coordinate `a` of a dim laid out as `group` (its
/// iters outermost first, all on `m`): the digits of `a` over the iters
/// (`⌊a / below⌋ mod extent`, the outermost without `mod`) times their
/// strides. Only when the region `[a, a + extent)` cannot leave one run of the
/// innermost iter — `extent` divides that iter's extent and every value of
/// `a` — is the offset of each of its elements this plus the slice at 0.
fn split_dim_offset(group: &[Iter], a: &Affine, extent: i64) -> Option<Affine> {
    let iters: Vec<&Iter> = group.iter().filter(|i| i.extent != 1).collect();
    let inner = iters.last()?;
    if iters.iter().any(|i| i.axis != Axis::M) || inner.extent % extent != 0 || a.divisor() % extent != 0 {
        return None;
    }
    let mut sym = Affine::default();
    let mut below = 1i64;
    for (k, it) in iters.iter().enumerate().rev() {
        let q = a.clone().floor_div(below)?;
        let digit = if k == 0 { q } else { q.floor_mod(it.extent)? };
        sym = sym.plus(digit.scale(it.stride)?)?;
        below = below.checked_mul(it.extent)?;
    }
    Some(sym)
}

/// The affine begin of dim `d` of a region of `b`, in loop variables and scope ids.
fn affine_begin(cx: &CallCx, b: &Buffer, d: usize, begin: &Expr) -> Result<Affine, Decline> {
    cx.affine(begin).ok_or_else(|| {
        Decline::new(
            CommonRule::SymbolicBegin,
            format!(
                "dim {d} of `{}` begins at `{}`, which is not affine in loop variables and scope ids (`//` and `%` by constants allowed)",
                b.name,
                crate::text::top_text(cx.kernel, begin)
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
        CommonRule::SymbolicBegin,
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

/// The threads of one instance must agree on the region (a cooperative copy
/// of a lane-dependent region has no single meaning).
pub fn check_uniform(cx: &CallCx, r: &BufferRegion, b: &Buffer) -> Result<(), Decline> {
    for (d, rg) in r.ranges.iter().enumerate() {
        if cx.env.varies_within(cx.kernel, &rg.begin, cx.scope.kind) {
            return Err(Decline::new(
                CommonRule::UniformRegion,
                format!(
                    "dim {d} of `{}` begins at `{}`, which differs between the threads of one {} instance",
                    b.name,
                    crate::text::top_text(cx.kernel, &rg.begin),
                    cx.scope.kind
                ),
            ));
        }
    }
    Ok(())
}

/// A region of a register buffer.
#[derive(Clone, Debug)]
pub struct RegOperand {
    /// The layout sliced to the region and canonicalized (CUDA fusion), thread axes included.
    pub tile: TileLayout,
}

/// Resolves a register region: a plain tile layout, constant begins (registers
/// have no runtime index), elements on `m`, one register per element.
pub fn register(cx: &CallCx, r: &BufferRegion) -> Result<RegOperand, String> {
    let b = cx.buf(r.buf);
    let Layout::Tile(t) = &b.layout else {
        return Err(format!(
            "`{}` has a swizzled layout ({}); register layouts are plain tile layouts",
            b.name, b.layout
        ));
    };
    let mut region = Vec::with_capacity(r.ranges.len());
    for (d, rg) in r.ranges.iter().enumerate() {
        match cx.affine(&rg.begin) {
            Some(a) if a.is_constant() => region.push((a.constant, rg.extent)),
            _ => {
                return Err(format!(
                    "dim {d} of `{}` begins at `{}`; register regions need constant begins (registers cannot be indexed at run time)",
                    b.name,
                    crate::text::top_text(cx.kernel, &rg.begin)
                ))
            }
        }
    }
    let sliced = t.slice(&b.shape, &region, Fusion::Cuda).map_err(|e| format!("`{}`: {e}", b.name))?;
    let tile = sliced.canonicalize(Fusion::Cuda).map_err(|e| format!("`{}`: {e}", b.name))?;
    if let Some(it) = tile.shard.iter().find(|i| i.axis.is_memory() && i.axis != Axis::M) {
        return Err(format!("`{}` stores elements on the {} axis; register layouts use `m`", b.name, it.axis));
    }
    if let Some(it) = tile.replica.iter().find(|i| i.axis.is_memory()) {
        return Err(format!("`{}` keeps each element in several registers (replica {}:{}); register variants need one register per element", b.name, it.extent, it.stride));
    }
    Ok(RegOperand { tile })
}

/// The thread axis a `kind`-scope operand's layout must number its threads by.
fn scope_axis(kind: ExecScope) -> Option<Axis> {
    match kind {
        ExecScope::Warp => Some(Axis::LaneId),
        ExecScope::Warpgroup => Some(Axis::TidInWg),
        ExecScope::Cta => Some(Axis::Tx),
        _ => None,
    }
}

/// Checks that the thread iters of `l` (sliced, canonical) number exactly the
/// `t` threads of a `kind`-scope call (§3.7 scope-level check) and returns the
/// thread id they use. At thread scope `l` must carry no thread axes. With
/// `replicas` (a load into registers: every copy of an element reads it), the
/// threads an element is replicated over count among them; without, a
/// replicated element is refused (one owner writes or combines it).
pub fn thread_part(
    l: &TileLayout,
    name: &str,
    kind: ExecScope,
    t: i64,
    replicas: bool,
) -> Result<Option<TidKind>, String> {
    if let Some(it) = l.replica.iter().find(|i| i.axis.is_thread()).filter(|_| !replicas) {
        return Err(format!(
            "`{name}` replicates elements over threads (replica on {}); register variants need one owner per element",
            it.axis
        ));
    }
    if let Some((a, v)) = l.offset.iter().find(|(a, v)| a.is_thread() && **v != 0) {
        return Err(format!("the region of `{name}` selects part of the threads (offset {v}@{a}); a region must cover every thread dimension"));
    }
    let replicated = l.replica.iter().filter(|i| replicas && i.axis.is_thread());
    let iters: Vec<Iter> = l.shard.iter().filter(|i| i.axis.is_thread()).chain(replicated).copied().collect();
    let Some(axis) = scope_axis(kind) else {
        return match iters.first() {
            None => Ok(None),
            Some(it) => Err(format!(
                "a thread-scope op cannot use `{name}`, which is distributed over threads ({}); call it at the scope its layout describes (e.g. `Tx.warp.<op>`), or pass this thread's registers `{name}.local()`",
                it.axis
            )),
        };
    };
    if iters.is_empty() {
        return Err(format!(
            "{kind}-scope op needs a {kind}-level operand whose layout carries thread axes ({axis} composing to {t}:1); got a thread-local view with no thread axes — pass the {kind}-level tensor, not its `.local()` (per-thread) view"
        ));
    }
    let mut axes: Vec<Axis> = iters.iter().map(|i| i.axis).collect();
    axes.dedup();
    // In a CTA of ≤ 32 (≤ 128) threads, `laneid` (`tid_in_wg`) numbers threads as `tx` does.
    let same_numbering = |a: Axis| {
        a == axis || (kind == ExecScope::Cta && ((a == Axis::LaneId && t <= 32) || (a == Axis::TidInWg && t <= 128)))
    };
    if axes.len() != 1 || !same_numbering(axes[0]) {
        let names: Vec<&str> = axes.iter().map(|a| a.name()).collect();
        if let Some((scope, _)) = axes.iter().find_map(|a| a.scopes()).filter(|(s, _)| s.wider_than(kind)) {
            return Err(format!(
                "`{name}` is distributed over a {scope} (thread axes [{}]), wider than this {kind}-scope call; call it at {scope} scope",
                names.join(", ")
            ));
        }
        return Err(format!(
            "{kind}-scope op operand `{name}` carries thread axes [{}]; after canonicalization a {kind}-level layout must use only '{axis}'",
            names.join(", ")
        ));
    }
    let mut sorted = iters.clone();
    sorted.sort_by_key(|i| i.stride);
    let mut expected = 1i64;
    for it in &sorted {
        if it.stride != expected {
            return Err(format!(
                "{kind}-scope op operand `{name}`: thread axes do not tile a complete {t}:1 (sorted by stride: expected stride {expected}, got {})",
                it.stride
            ));
        }
        // Saturated: a huge extent then fails the checks instead of overflowing.
        expected = expected.saturating_mul(it.extent);
    }
    if expected != t {
        return Err(format!(
            "{kind}-scope op operand `{name}`: thread axes span {expected} threads, not the full {t} of the {kind}"
        ));
    }
    Ok(Some(match axes[0] {
        Axis::LaneId => TidKind::Lane,
        Axis::TidInWg => TidKind::TidInWg,
        _ => TidKind::Tx,
    }))
}

/// `x` split over the iters of a group (outermost first), `m` strides summed.
pub fn group_offset(g: &[Iter], mut x: i64) -> i64 {
    let mut acc = 0;
    for (k, it) in g.iter().enumerate().rev() {
        let c = if k == 0 { x } else { x % it.extent };
        x /= it.extent;
        if it.axis == Axis::M {
            acc += c * it.stride;
        }
    }
    acc
}
