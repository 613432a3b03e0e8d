//! What `tma_auto` and `tma_explicit` share (docs/tile-primitives.md §3.20): the
//! call's configuration, the descriptor plan ([`TmaPlan`]: dimensions in the
//! driver's order — innermost first — with sizes, byte strides, box extents and
//! coordinates, plus the issue loops of `tma_auto`), the hardware rules every
//! descriptor is validated by (each failure a typed decline naming its rule), the
//! address-preserving canonicalization and descriptor-unit promotion `tma_auto`
//! repairs with, and the emission: the descriptor registered once per kernel
//! (`A_tmap`, a kernel parameter) and one `cp.async.bulk.tensor` per issue.

use super::call::CopyAsyncRule;
use crate::copy::call::CopyOps;
use crate::operand::MemOperand;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter};
use tirx_ir::hir::{BufId, Expr, ExprKind, MbarRef, MemScope, TileArg};
use tirx_ir::lir::tmap::{swizzle_bytes, swizzle_repeat, TMAP_MAX_BOX, TMAP_MAX_DIM, TMAP_MAX_RANK, TMAP_MAX_STRIDE};
use tirx_ir::lir::{LExpr, LStmt, LStmtKind, SymExpr, SymOp, TensorMap, TmaCopy, TmapDtype};
use tirx_ir::op::{self, ConfigKey, ConfigValue, Evict, OobFill, TmaReduce};
use tirx_ir::{Arch, DType};
use tirx_layout::{ExecScope, Layout};

/// The config keys the TMA variants read.
pub(crate) const HONOURS: &[ConfigKey] = &[
    ConfigKey::CacheHint,
    ConfigKey::Oob,
    ConfigKey::TensormapL2Promotion,
    ConfigKey::CtaGroup,
    ConfigKey::UseTmaReduce,
];

/// A coordinate: `begin / div * mul` (0 without a begin).
#[derive(Clone, Debug)]
pub(crate) struct Coord {
    pub begin: Option<Expr>,
    pub div: i64,
    pub mul: i64,
}

impl Coord {
    pub fn zero() -> Coord {
        Coord { begin: None, div: 1, mul: 1 }
    }
    pub fn of(begin: &Expr, div: i64) -> Coord {
        Coord { begin: Some(begin.clone()), div, mul: 1 }
    }
    fn is_zero(&self) -> bool {
        self.begin.is_none()
    }
}

/// One descriptor dimension.
#[derive(Clone, Debug)]
pub(crate) struct Dim {
    /// `globalDim`: a constant, or an expression of the scalar parameters.
    pub size: SymExpr,
    /// Bytes between consecutive indices (the innermost dimension's is the element size):
    /// a constant, or an expression of the scalar parameters (run-time strides).
    pub stride: SymExpr,
    pub boxed: i64,
    pub coord: Coord,
    /// The issue loop that advances this dimension's coordinate, if any.
    pub issue: Option<usize>,
}

/// An issue loop of `tma_auto`: `extent` instructions, the shared start advancing by
/// `smem_stride` elements and the coordinate of dimension `dim` by one each.
#[derive(Clone, Debug)]
pub(crate) struct Issue {
    pub extent: i64,
    pub smem_stride: i64,
    pub dim: usize,
}

/// The call's configuration.
#[derive(Clone, Debug)]
pub(crate) struct TmaConfig {
    pub load: bool,
    pub bar: Option<MbarRef>,
    pub cache: Option<Evict>,
    pub l2: u8,
    pub oob: Option<OobFill>,
    /// `cta_mask=`: a multicast load's CTAs of the cluster (bit r: rank r).
    pub mask: Option<Expr>,
    /// `use_tma_reduce=`: a store that adds into global memory.
    pub reduce: Option<TmaReduce>,
}

/// A planned TMA copy: the descriptor, the issues, the shared start.
#[derive(Clone, Debug)]
pub(crate) struct TmaPlan {
    pub cfg: TmaConfig,
    pub global: BufId,
    pub dtype: TmapDtype,
    /// Bytes from the buffer's first element to the tensor's.
    pub base_offset: i64,
    pub dims: Vec<Dim>,
    pub issues: Vec<Issue>,
    pub swizzle: u8,
    /// The shared region: its start (pre-swizzle, the layout's element offset).
    pub smem: MemOperand,
    /// Bytes of one element of the copy (the buffers' dtype).
    pub elem: i64,
}

impl TmaPlan {
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    pub fn box_bytes(&self) -> i64 {
        self.dims.iter().map(|d| d.boxed).product::<i64>() * i64::from(self.dtype.bytes())
    }
    pub fn instructions(&self) -> i64 {
        self.issues.iter().map(|i| i.extent).product()
    }

    /// `TMA load, box 64×8×4 (4096 B) in 1 instruction, 128-B swizzle`.
    pub fn summary(&self) -> String {
        let dir = match (self.cfg.load, self.cfg.reduce) {
            (true, _) => "TMA load",
            (false, Some(_)) => "TMA reduce-add",
            (false, None) => "TMA store",
        };
        let boxes: Vec<String> = self.dims.iter().map(|d| d.boxed.to_string()).collect();
        let n = self.instructions();
        let mut s = format!(
            "{dir}, {}-D box {} ({} B) in {n} instruction{}",
            self.rank(),
            boxes.join("×"),
            self.box_bytes(),
            if n == 1 { "" } else { "s" }
        );
        if self.swizzle > 0 {
            s.push_str(&format!(", {}-B swizzle", swizzle_bytes(self.swizzle)));
        }
        if self.cfg.mask.is_some() {
            s.push_str(", multicast to the CTAs of cta_mask");
        }
        s
    }

    /// The descriptor as explain shows it.
    pub fn descriptor_note(&self, cx: &CallCx) -> String {
        let list = |v: Vec<String>| v.join(", ");
        let sym = |e: &SymExpr| cx.env.sym.text(e);
        let coords: Vec<String> = self.dims.iter().map(|d| coord_text(cx, &d.coord, d.issue)).collect();
        format!(
            "descriptor of `{}`: {} dims [{}], strides [{}] B, box [{}], coords [{}]{}",
            cx.buf(self.global).name,
            self.dtype.name(),
            list(self.dims.iter().map(|d| sym(&d.size)).collect()),
            list(self.dims.iter().skip(1).map(|d| sym(&d.stride)).collect()),
            list(self.dims.iter().map(|d| d.boxed.to_string()).collect()),
            list(coords),
            if self.base_offset != 0 { format!(", base + {} B", self.base_offset) } else { String::new() }
        ) + &self.cfg.mask.as_ref().map_or(String::new(), |m| {
            format!(
                "; multicast cta_mask={} to the cluster of {}",
                crate::text::top_text(cx.kernel, m),
                cx.env.cluster_size()
            )
        })
    }
}

fn coord_text(cx: &CallCx, c: &Coord, issue: Option<usize>) -> String {
    let mut s = match &c.begin {
        None => "0".to_string(),
        Some(e) => {
            let t = crate::text::top_text(cx.kernel, e);
            if c.div == 1 {
                t
            } else {
                format!("({t}) // {}", c.div)
            }
        }
    };
    if c.mul != 1 && c.begin.is_some() {
        s = format!("{s} * {}", c.mul);
    }
    if let Some(i) = issue {
        s = format!("{s} + i{i}");
    }
    s
}

/// The call's configuration, checked for the TMA variants: thread scope, a
/// global ↔ shared pair, `mbar` on loads only, no `predicate`/`remote_cta_id`, and
/// `cta_mask` only on loads in a cluster, naming CTAs of the cluster.
pub(crate) fn config(cx: &CallCx, ops: &CopyOps) -> Result<TmaConfig, Decline> {
    if cx.scope.kind != ExecScope::Thread {
        return Err(Decline::new(
            CommonRule::ExecScope,
            format!(
                "unsupported exec_scope {}, expected single thread: one thread issues a TMA copy (`if tid == 0: Tx.copy_async(...)`)",
                cx.scope.kind
            ),
        ));
    }
    let load = match (ops.src_buf.scope, ops.dst_buf.scope) {
        (MemScope::Global, d) if d.is_shared() => true,
        (s, MemScope::Global) if s.is_shared() => false,
        _ => {
            return Err(Decline::new(
                CommonRule::ScopeAllowed,
                format!(
                    "TMA copies global <-> shared, not {} -> {}",
                    ops.src_buf.scope.name(),
                    ops.dst_buf.scope.name()
                ),
            ))
        }
    };
    if cx.arg(&op::PREDICATE).is_some() {
        return Err(Decline::new(
            CommonRule::Config,
            "a TMA copy takes no `predicate=`: one thread issues it; guard the call with an `if` instead",
        ));
    }
    if cx.arg(&op::REMOTE_CTA).is_some() {
        return Err(Decline::new(
            CommonRule::Config,
            "`remote_cta_id=` is for shared -> peer-CTA copies (dispatch=\"dsmem\")",
        ));
    }
    let bar = match cx.arg(&op::MBAR) {
        Some(TileArg::Barrier(b)) => Some(b.clone()),
        _ => None,
    };
    let mask = cta_mask(cx)?;
    let has_mask = mask.is_some();
    let oob = match cx.call.config(ConfigKey::Oob).map(|e| e.value) {
        Some(ConfigValue::Oob(o)) => Some(o),
        _ => None,
    };
    if load && bar.is_none() {
        return Err(Decline::new(
            CopyAsyncRule::Mbar,
            "a TMA load completes on an mbarrier: pass `mbar=bar.ptr_to([i])` (and announce its bytes with mbarrier.arrive.expect_tx)",
        ));
    }
    if !load {
        let what = match (&bar, oob, has_mask) {
            (Some(_), _, _) => {
                Some("`mbar=`: a TMA store completes in a bulk group (cp.async.bulk.commit_group / wait_group)")
            }
            (_, Some(_), _) => Some("`oob=`: a TMA store clips what lies outside the tensor"),
            (_, _, true) => Some("`cta_mask=`: multicast applies to loads"),
            _ => None,
        };
        if let Some(w) = what {
            return Err(Decline::new(CopyAsyncRule::Direction, format!("shared -> global TMA takes no {w}")));
        }
    }
    if let Some(ConfigValue::CtaGroup(2)) = cx.call.config(ConfigKey::CtaGroup).map(|e| e.value) {
        if !cx.opts.arch.supports(Arch::SM_100F) {
            return Err(Decline::arch("cta_group=2", Arch::SM_100F, cx.opts.arch));
        }
        return Err(Decline::new(
            CommonRule::Config,
            "cta_group=2 (one TMA copy for a CTA pair of tcgen05 MMAs) is not implemented yet; write cta_group=1",
        ));
    }
    let cache = match cx.call.config(ConfigKey::CacheHint).map(|e| e.value) {
        Some(ConfigValue::Evict(e)) => Some(e),
        _ => None,
    };
    let l2 = match cx.call.config(ConfigKey::TensormapL2Promotion).map(|e| e.value) {
        Some(ConfigValue::L2Promotion(n)) => n,
        _ => 2,
    };
    let reduce = match cx.call.config(ConfigKey::UseTmaReduce).map(|e| e.value) {
        Some(ConfigValue::TmaReduce(r)) => Some(r),
        _ => None,
    };
    if load && reduce.is_some() {
        return Err(Decline::new(
            CopyAsyncRule::Direction,
            "global -> shared TMA takes no `use_tma_reduce=`: a reduction adds a shared box into global memory (a store)",
        ));
    }
    Ok(TmaConfig { load, bar, cache, l2, oob, mask, reduce })
}

/// `cta_mask=`: absent or the constant 0 (the reference's default) is no multicast;
/// otherwise an integer in a cluster launch, and a constant names only CTAs of the
/// cluster (a run-time mask is checked by the simulator, docs/tile-primitives.md §3.20).
fn cta_mask(cx: &CallCx) -> Result<Option<Expr>, Decline> {
    let Some(e) = cx.scalar(&op::CTA_MASK) else { return Ok(None) };
    if !e.dtype.is_int() {
        return Err(Decline::new(
            CopyAsyncRule::CtaMask,
            format!("`cta_mask=` is an integer bit mask, not {}", e.dtype),
        ));
    }
    let value = match e.kind {
        ExprKind::Int(0) => return Ok(None),
        ExprKind::Int(v) => Some(v),
        _ => None,
    };
    let size = cx.env.cluster_size();
    if size == 1 {
        return Err(Decline::new(
            CopyAsyncRule::Cluster,
            "`cta_mask=` multicasts to the CTAs of a cluster, and this kernel is not launched in clusters (declare `T.cta_id_in_cluster([n])`)",
        ));
    }
    if let Some(v) = value.filter(|&v| !(1..1i64 << size).contains(&v)) {
        return Err(Decline::new(
            CopyAsyncRule::CtaMask,
            format!(
                "`cta_mask={v:#x}` names CTAs outside the cluster of {size} (bits 0..{} are ranks 0..{})",
                size - 1,
                size - 1
            ),
        ));
    }
    Ok(Some(e.clone()))
}

/// The descriptor element type of `t`, or a `dtype` decline.
pub(crate) fn dtype_of(t: DType) -> Result<TmapDtype, Decline> {
    TmapDtype::of(t).ok_or_else(|| Decline::new(CommonRule::Dtype, format!("TMA has no descriptor type for {t}")))
}

/// The TMA swizzle mode of the shared buffer's layout (0 without one), or a decline
/// for a swizzle the TMA unit does not apply.
pub(crate) fn shared_swizzle(cx: &CallCx, buf: BufId) -> Result<u8, Decline> {
    let b = cx.buf(buf);
    match (&b.layout, crate::lay::tma_swizzle(&b.layout, b.dtype)) {
        (Layout::Tile(_), _) => Ok(0),
        (Layout::Compose(c), _) if c.swizzle.swizzle_len == 0 => Ok(0),
        (_, Some(m)) => Ok(m),
        (Layout::Compose(c), None) => Err(Decline::new(
            CopyAsyncRule::Swizzle,
            format!(
                "`{}` is swizzled as ComposeLayout({}, {}, {}, ..){}; TMA swizzles 16-byte chunks with the row bits 3 above them (`mma_shared_layout(dtype, 1..3, shape)`: per_element = log2(16 / {} B), atom_len 3)",
                b.name,
                c.swizzle.per_element,
                c.swizzle.swizzle_len,
                c.swizzle.atom_len,
                if c.swizzle.inner { "" } else { " (outer)" },
                b.dtype.bytes()
            ),
        )),
    }
}

/// A global buffer as a tensor: per dim its size (dim 0 may be a run-time value) and
/// element stride, and the base offset in elements. Each dim is one `m` iter.
pub(crate) struct GlobalView {
    pub sizes: Vec<SymExpr>,
    pub strides: Vec<SymExpr>,
    pub base: i64,
}

pub(crate) fn global_view(cx: &CallCx, buf: BufId) -> Result<GlobalView, Decline> {
    let b = cx.buf(buf);
    let Layout::Tile(t) = &b.layout else {
        return Err(Decline::new(
            CommonRule::Layout,
            format!("global `{}` is swizzled; a TMA tensor is a plain strided view", b.name),
        ));
    };
    if t.has_thread_axis() || !t.replica.is_empty() {
        return Err(Decline::new(
            CommonRule::Layout,
            format!("the layout of global `{}` is not one address per element", b.name),
        ));
    }
    let sizes = global_sizes(cx, buf)?;
    if let Some(xs) = &b.dyn_strides {
        let strides = xs
            .iter()
            .map(|e| {
                crate::launch::to_sym(cx.env, e).ok_or_else(|| {
                    Decline::new(
                        CommonRule::RuntimeStride,
                        format!("a stride of `{}` is not an integer expression of scalar parameters", b.name),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        stride_alignment_proven(cx, b, xs)?;
        return Ok(GlobalView { sizes, strides, base: 0 });
    }
    use crate::lay::DimStridesError;
    let strides = crate::lay::dim_strides(t, &b.shape).map_err(|e| match e {
        DimStridesError::NoSplit => Decline::new(
            CommonRule::Layout,
            format!("the layout of `{}` does not split over its shape {:?}", b.name, b.shape),
        ),
        DimStridesError::Split(d) => Decline::new(
            CommonRule::Layout,
            format!(
                "dim {d} of `{}` is split over several layout iters; a TMA descriptor has one stride per dimension",
                b.name
            ),
        ),
    })?;
    let strides = strides.into_iter().map(SymExpr::Int).collect();
    Ok(GlobalView { sizes, strides, base: crate::lay::m_offset(t) })
}

/// Each outer run-time (not constant) stride of `b` is provably a multiple of 16 bytes (TMA's
/// `globalStrides`; every descriptor stride of the dim is a multiple of it): from the
/// divisibility `T.assume` states, which the launch then checks where it is written.
fn stride_alignment_proven(cx: &CallCx, b: &tirx_ir::hir::Buffer, xs: &[Expr]) -> Result<(), Decline> {
    let elem = i64::from(b.dtype.bytes());
    for (d, e) in xs.iter().enumerate().take(xs.len().saturating_sub(1)) {
        if matches!(e.kind, ExprKind::Int(_)) {
            continue; // (a constant is checked with the descriptor: `validate`)
        }
        let div = cx.affine(e).map(|a| cx.divisor(&a));
        if div.is_some_and(|g| (g * elem) % 16 == 0) {
            continue;
        }
        let text = crate::text::top_text(cx.kernel, e);
        let need = 16 / crate::affine::gcd(16, elem);
        return Err(Decline::new(
            CopyAsyncRule::GlobalStride,
            format!(
                "stride {d} of `{}` (`{text}` elements of {elem} B) is not provably a multiple of 16 bytes, as a TMA descriptor's strides are; state it: `T.assume({text} % {need} == 0)`",
                b.name
            ),
        ));
    }
    Ok(())
}

/// The size of each dim of global `buf` (dim 0 may be a run-time value).
fn global_sizes(cx: &CallCx, buf: BufId) -> Result<Vec<SymExpr>, Decline> {
    let b = cx.buf(buf);
    let mut sizes: Vec<SymExpr> = b.shape.iter().map(|&n| SymExpr::Int(n)).collect();
    if let Some(rows) = &b.dyn_outer {
        sizes[0] = crate::launch::to_sym(cx.env, rows).ok_or_else(|| {
            Decline::new(
                CopyAsyncRule::GlobalDim,
                format!("dim 0 of `{}` is not an integer expression of scalar parameters", b.name),
            )
        })?;
    }
    Ok(sizes)
}

/// Checks `plan` against the hardware's descriptor rules (docs/tile-primitives.md §3.20).
pub(crate) fn validate(cx: &CallCx, p: &TmaPlan) -> Result<(), Decline> {
    let esize = i64::from(p.dtype.bytes());
    if !(1..=TMAP_MAX_RANK).contains(&p.rank()) {
        return Err(Decline::new(
            CopyAsyncRule::Rank,
            format!("the descriptor needs {} dimensions; TMA has 1 to 5", p.rank()),
        ));
    }
    if p.base_offset % 16 != 0 {
        return Err(Decline::new(
            CopyAsyncRule::GlobalBase,
            format!("the tensor starts {} bytes into its buffer, not a multiple of 16", p.base_offset),
        ));
    }
    match p.dims[0].stride.as_int() {
        Some(s) if s == esize => {}
        Some(s) => {
            return Err(Decline::new(
                CopyAsyncRule::InnerStride,
                format!(
                    "the box's innermost dimension has a global stride of {s} bytes, not one element: the innermost memory stride must be provably one (TMA's innermost dimension is the tensor's contiguous one)"
                ),
            ))
        }
        None => {
            return Err(Decline::new(
                CopyAsyncRule::InnerStride,
                format!(
                    "the box's innermost dimension has the run-time global stride `{}` bytes: the innermost memory stride must be provably one element (TMA's innermost dimension is the tensor's contiguous one)",
                    cx.env.sym.text(&p.dims[0].stride)
                ),
            ))
        }
    }
    for (i, d) in p.dims.iter().enumerate() {
        if let SymExpr::Int(n) = d.size {
            if !(1..=TMAP_MAX_DIM).contains(&n) {
                return Err(Decline::new(
                    CopyAsyncRule::GlobalDim,
                    format!("globalDim[{i}] = {n} is outside (0, 2^32]"),
                ));
            }
        }
        // A run-time stride is checked when the launch encodes the descriptor.
        let bad_stride = d.stride.as_int().is_some_and(|s| s % 16 != 0 || !(0..TMAP_MAX_STRIDE).contains(&s));
        if i > 0 && bad_stride {
            return Err(Decline::new(
                CopyAsyncRule::GlobalStride,
                format!(
                    "globalStrides[{i}] = {} bytes is not a multiple of 16 (below 2^40)",
                    cx.env.sym.text(&d.stride)
                ),
            ));
        }
        if !(1..=i64::from(TMAP_MAX_BOX)).contains(&d.boxed) {
            return Err(Decline::new(CopyAsyncRule::BoxDim, format!("boxDim[{i}] = {} is outside 1..=256", d.boxed)));
        }
    }
    let inner = p.dims[0].boxed * esize;
    if inner % 16 != 0 {
        return Err(Decline::new(
            CopyAsyncRule::InnerBoxBytes,
            format!("the box's innermost run is {inner} bytes; TMA moves multiples of 16"),
        ));
    }
    let span = i64::from(swizzle_bytes(p.swizzle));
    if span > 0 && inner != span {
        return Err(Decline::new(
            CopyAsyncRule::SwizzleInnerBox,
            format!("the box's innermost run is {inner} bytes, but a {span}-B swizzle needs rows of exactly {span}"),
        ));
    }
    if let Some(r) = p.cfg.reduce.filter(|&r| !TmaCopy::reduce_supported(r, p.dtype)) {
        return Err(Decline::new(
            CopyAsyncRule::ReduceDtype,
            format!(
                "use_tma_reduce={} adds float32, float16, bfloat16, int32, uint32 or uint64 elements, not {}",
                ConfigValue::TmaReduce(r).script(),
                p.dtype.name()
            ),
        ));
    }
    if p.cfg.oob == Some(OobFill::Nan) && !p.dtype.is_float() {
        return Err(Decline::new(
            CopyAsyncRule::NanOobDtype,
            format!("oob=\"nan\" fills with NaN, which a {} tensor has not", p.dtype.name()),
        ));
    }
    shared_aligned(p, &cx.buf(p.smem.buf).name)
}

/// Every instruction's shared start is aligned for its box (16 B; a swizzle's repeat).
fn shared_aligned(p: &TmaPlan, name: &str) -> Result<(), Decline> {
    let align = i64::from(swizzle_repeat(p.swizzle));
    let off = crate::lay::m_offset(&p.smem.tile) * p.elem;
    let step = p.smem.sym_div.saturating_mul(p.elem);
    let issue = p.issues.iter().map(|i| i.smem_stride * p.elem).find(|s| s % align != 0);
    if off % align != 0 || (step != 0 && step % align != 0) || issue.is_some() {
        return Err(Decline::new(
            CopyAsyncRule::SharedPointer,
            format!(
                "a box starts at byte {off}{} of `{name}`; a TMA box starts on {align} bytes{}",
                if p.smem.sym.is_zero() { String::new() } else { format!(" + multiples of {step}") },
                if p.swizzle > 0 { " (the swizzle pattern's repeat)" } else { "" }
            ),
        ));
    }
    Ok(())
}

/// Drops address-free unit dimensions and merges adjacent dimensions where the inner one
/// is copied whole from 0 and the strides chain (addresses unchanged), keeping box
/// extents legal.
pub(crate) fn canonicalize(p: &mut TmaPlan) {
    loop {
        if let Some(i) = (0..p.rank()).find(|&i| droppable(p, i)) {
            remove_dim(p, i);
            continue;
        }
        if let Some(i) = (0..p.rank().saturating_sub(1)).find(|&i| mergeable(p, i)) {
            let (inner, outer) = (p.dims[i].clone(), p.dims[i + 1].clone());
            let n = const_size(&inner).unwrap_or(1);
            let coord =
                if outer.coord.is_zero() { Coord::zero() } else { Coord { mul: outer.coord.mul * n, ..outer.coord } };
            p.dims[i] = Dim {
                size: SymExpr::bin(SymOp::Mul, outer.size, SymExpr::Int(n)),
                stride: inner.stride,
                boxed: inner.boxed * outer.boxed,
                coord,
                issue: None,
            };
            p.dims[i].size = fold(&p.dims[i].size);
            remove_dim(p, i + 1);
            continue;
        }
        return;
    }
}

fn const_size(d: &Dim) -> Option<i64> {
    match d.size {
        SymExpr::Int(n) => Some(n),
        _ => None,
    }
}

fn fold(e: &SymExpr) -> SymExpr {
    match e {
        SymExpr::Bin(SymOp::Mul, a, b) => match (&**a, &**b) {
            (SymExpr::Int(x), SymExpr::Int(y)) => x.checked_mul(*y).map_or_else(|| e.clone(), SymExpr::Int),
            (x, SymExpr::Int(1)) => x.clone(),
            _ => e.clone(),
        },
        _ => e.clone(),
    }
}

/// A unit dimension with no coordinate, issue or stride duty.
fn droppable(p: &TmaPlan, i: usize) -> bool {
    let d = &p.dims[i];
    let unit = const_size(d) == Some(1) && d.boxed == 1 && d.issue.is_none() && d.coord.is_zero();
    // The innermost may go only when the next dimension is contiguous too.
    unit && p.rank() > 1 && (i > 0 || p.dims[1].stride == d.stride)
}

fn mergeable(p: &TmaPlan, i: usize) -> bool {
    let (a, b) = (&p.dims[i], &p.dims[i + 1]);
    let Some(n) = const_size(a) else { return false };
    let chained = a.issue.is_none()
        && b.issue.is_none()
        && a.boxed == n
        && a.coord.is_zero()
        && a.stride.as_int().and_then(|s| n.checked_mul(s)).is_some_and(|s| b.stride.as_int() == Some(s))
        && a.boxed * b.boxed <= i64::from(TMAP_MAX_BOX);
    let merged_fits = match const_size(b) {
        Some(m) => n.checked_mul(m).is_some_and(|x| x <= TMAP_MAX_DIM),
        None => true,
    };
    // A merged innermost dimension must still be a legal row (bytes, swizzle).
    let inner_ok = i > 0 || {
        let bytes = a.boxed * b.boxed * i64::from(p.dtype.bytes());
        let span = i64::from(swizzle_bytes(p.swizzle));
        bytes % 16 == 0 && (span == 0 || bytes == span)
    };
    chained && merged_fits && inner_ok
}

fn remove_dim(p: &mut TmaPlan, i: usize) {
    p.dims.remove(i);
    for is in &mut p.issues {
        if is.dim > i {
            is.dim -= 1;
        }
    }
}

/// The same bytes in descriptor units twice as wide (u16/u32/u64): the innermost size,
/// box and coordinate halve. `None` when they are odd, a stride would not divide, or the
/// innermost dimension is issue-driven.
pub(crate) fn promote(p: &TmaPlan) -> Option<TmaPlan> {
    let wide = p.dtype.widened()?;
    let d0 = &p.dims[0];
    if d0.issue.is_some() || d0.boxed % 2 != 0 || const_size(d0).is_none_or(|n| n % 2 != 0) {
        return None;
    }
    let unit = i64::from(wide.bytes());
    // A run-time stride is a multiple of 16 bytes at launch (checked there), so of `unit`.
    if p.dims.iter().skip(1).any(|d| d.stride.as_int().is_some_and(|s| s % unit != 0)) || p.cfg.oob.is_some() {
        return None;
    }
    let mut q = p.clone();
    q.dtype = wide;
    let d = &mut q.dims[0];
    d.size = SymExpr::Int(const_size(d0)? / 2);
    d.boxed /= 2;
    d.stride = SymExpr::Int(unit);
    d.coord.div *= 2;
    if !d.coord.is_zero() && d.coord.mul % 2 == 0 {
        d.coord.mul /= 2;
        d.coord.div /= 2;
    }
    Some(q)
}

/// Whether the innermost coordinate's value is a whole number of the promoted unit:
/// its begin divides by its divisor (checked by the caller before promoting).
pub(crate) fn coord_divides(cx: &CallCx, c: &Coord) -> bool {
    match &c.begin {
        None => true,
        Some(e) => cx.affine(e).is_some_and(|a| {
            let d = cx.divisor(&a);
            d == 0 || d % c.div == 0
        }),
    }
}

/// Registers the descriptor and emits one TMA instruction per issue (an unrolled
/// loop over the issue index when there are several).
pub(crate) fn emit(p: &TmaPlan, em: &mut Emitter) -> Result<(), Bug> {
    let (global, _) = em.lbuf(p.global)?;
    let map = TensorMap {
        name: String::new(),
        buf: global,
        dtype: p.dtype,
        base_offset: p.base_offset,
        dims: p.dims.iter().map(|d| d.size.clone()).collect(),
        strides: p.dims.iter().skip(1).map(|d| d.stride.clone()).collect(),
        boxes: p.dims.iter().map(|d| d.boxed as u32).collect(),
        elem_strides: vec![1; p.rank()],
        swizzle: p.swizzle,
        l2_promotion: p.cfg.l2,
        oob_nan: p.cfg.oob == Some(OobFill::Nan),
    };
    let id = em.b.tmap(map);
    let (smem, start) = p.smem.start(em)?;
    let mut coords = Vec::with_capacity(p.rank());
    for d in &p.dims {
        coords.push(coord_expr(em, &d.coord)?);
    }
    let bar = p.cfg.bar.as_ref().map(|r| super::call::mbar(em, r)).transpose()?;
    let multicast = match &p.cfg.mask {
        Some(m) => {
            let v = em.expr(m)?;
            Some(em.builder().convert(v, DType::I32))
        }
        None => None,
    };
    let copy = |coords: Vec<LExpr>, smem_index: LExpr| TmaCopy {
        map: id,
        coords,
        smem,
        smem_index,
        bar: bar.clone(),
        multicast: multicast.clone(),
        cache: p.cfg.cache,
        reduce: p.cfg.reduce,
    };
    let op = |c: TmaCopy| {
        LStmtKind::Async(if p.cfg.load {
            tirx_ir::lir::AsyncOp::TmaLoad(c)
        } else {
            tirx_ir::lir::AsyncOp::TmaStore(c)
        })
    };
    let n = p.instructions();
    if n == 1 {
        em.push(op(copy(coords, start)));
        return Ok(());
    }
    let var = em.var("issue", DType::I32, Some((0, n - 1)));
    let i = LExpr::Var(var);
    let b = em.builder();
    let (mut smem_index, mut below) = (start, 1i64);
    for is in p.issues.iter().rev() {
        let digit = b.rem_c(b.div_c(i.clone(), below), is.extent);
        smem_index = b.add(smem_index, b.mul(digit.clone(), LExpr::i32(is.smem_stride)));
        coords[is.dim] = b.add(coords[is.dim].clone(), digit);
        below *= is.extent;
    }
    let body = vec![LStmt::new(op(copy(coords, smem_index)), em.span)];
    em.push(LStmtKind::For { var, begin: LExpr::i32(0), extent: LExpr::i32(n), unroll: true, body });
    Ok(())
}

/// `begin / div * mul` as an int32 LIR expression.
fn coord_expr(em: &mut Emitter, c: &Coord) -> Result<LExpr, Bug> {
    let Some(e) = &c.begin else { return Ok(LExpr::i32(0)) };
    let v = em.expr(e)?;
    let b = em.builder();
    let v = b.convert(v, DType::I32);
    let v = b.div_c(v, c.div);
    Ok(b.mul(v, LExpr::i32(c.mul)))
}

/// The two regions of an async bulk copy: one dtype and as many elements on each side
/// (their shapes may differ: elements correspond in row-major order), one range per
/// buffer dim (the reference's TMA contract).
pub(crate) fn operands<'a>(cx: &CallCx<'a>) -> Result<CopyOps<'a>, Decline> {
    crate::copy::call::operands_matching(cx, |dst, src| {
        let (de, se) = (CopyOps::elems(dst), CopyOps::elems(src));
        (de != se).then(|| format!("dst region has {de} elements, src region {se}"))
    })
}
