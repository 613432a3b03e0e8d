//! gemm_async → wgmma (priority 10, docs/tile-primitives.md §3.19).
//!
//! **Accepts** `Tx.warpgroup.gemm_async(D, A, B, transA=False, transB=False,
//! accum=False)` — `D = A·Bᵀ`, or `D = A·Bᵀ + D` when `accum` — on sm_90a
//! (`arch`), with the warpgroup's 128 threads active (`all_threads_active`,
//! `exec_scope`), when:
//! * A is M×K (K×M with `transA`), B is N×K (K×N with `transB`), D M×N; M a
//!   multiple of 64, K of the instruction's k (16 for 16-bit types, 8 tf32, 32
//!   fp8), N of 8 (`operand`); no block scaling (`SFA`/`SFB` absent: `operand`);
//! * the types are a wgmma form (`dtype`; docs/lir.md §2.11): f16/bf16 → f32,
//!   f32 read as tf32 → f32, fp8 e4m3/e5m2 (mixed) → f32, f16/fp8 → f16;
//! * D is in registers (`operand_scope`) laid out as the wgmma accumulator
//!   (`fragment`): per 64×Nᵢ tile, register `r` of thread `tid` holds element
//!   (16·(tid/32) + g + 8·(i/2 mod 2), 8·(i/4) + 2t + i mod 2), `g = lane/4`,
//!   `t = lane mod 4`, `i` its element index — e.g.
//!   `S[(4, 2, 8, N/8, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)]`;
//! * B is in shared memory, A in shared memory or in registers (the wgmma A
//!   fragment, `fragment`) (`operand_scope`); a shared operand is a canonical
//!   wgmma tile (`layout`): each instruction's 64×k (A) or Nᵢ×k (B) block is
//!   addressed exactly by one descriptor — K-major or (16-bit types only)
//!   MN-major, the same leading and stride byte offsets for every block — with
//!   the layout's swizzle a wgmma swizzle (`swizzle`: 16-byte chunks XORed with
//!   32, 64 or 128-byte rows, `ComposeLayout(log2(16/bytes), 1..3, 3)`, what
//!   `mma_shared_layout` builds); every block starts on a 16-byte boundary and,
//!   swizzled, in the first row of a pattern period (`alignment`: misaligned
//!   base), also for every value of a symbolic begin; the region begins agree
//!   across the warpgroup (`uniform_region`);
//! * `accum` is a constant or a bool the whole warpgroup agrees on (`scalar`);
//!   D shares no register with A (`operand`).
//!
//! **Algorithm** (all in `plan`): D's homes (warp, lane, register, from its
//! layout) are matched against the accumulator fragment of each 64×Nᵢ tile,
//! trying Nᵢ from the largest multiple of 8 up to 256 that divides N down;
//! register A likewise against the A fragment. A shared operand's elements are
//! read through the one operand model as element offsets before the swizzle;
//! the leading and stride byte offsets come from the first block's elements
//! (8 rows / 8 k-rows / one swizzle atom apart, per docs/lir.md §2.11's table),
//! and then every element of every block must be where that descriptor reads
//! it, which names the first one that is not.
//!
//! **Generated code**: `wgmma.fence`, then for every K tile, every 64-row tile
//! and every Nᵢ tile one `wgmma.mma_async` (scale-d = `accum` on the first K
//! tile, 1 after), then `wgmma.commit_group`. The call does not wait: the
//! accumulator is defined after `T.ptx.wgmma.wait_group(n)`, and the shared
//! inputs may be overwritten after that wait (the simulator checks both).
//!
//! ```text
//! wgmma.fence
//! wgmma.m64n128k16.f32.bf16.bf16 D = acc[0:64] <- desc(A_s[0]; K-major, 128B, lbo 16, sbo 1024) * desc(B_s[0]; ..) + (k > 0) ? D : 0
//! wgmma.m64n128k16.f32.bf16.bf16 D = acc[0:64] <- desc(A_s[16]; ..) * desc(B_s[16]; ..) + D
//! wgmma.commit_group
//! ```
//!
//! Differences from the reference: its `gemm_async` lowers to Blackwell's
//! tcgen05 (accumulator in tensor memory, completion through an mbarrier); on
//! Hopper it has only raw wgmma intrinsics. Here the same call lowers to
//! wgmma, reads the swizzle and the descriptor offsets off the layouts instead
//! of taking them as arguments, and infers major-ness from the layout
//! (`transA`/`transB` only say which region dim is K).

use super::call::GemmRule;
use super::fragment::{self, MatrixOperand, TileRegs};
use crate::affine::Affine;
use crate::operand::{self, group_offset};
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Rule, Variant};
use tirx_ir::hir::{BufId, BufferRegion, Expr, ExprKind, MemScope, TileOp};
use tirx_ir::lir::wgmma::{
    Major, SmemDesc, Wgmma, WgmmaA, WgmmaIn, WgmmaKind, WgmmaSwizzle, WgmmaSync, DESC_MAX_OFFSET, WGMMA_ARCH, WGMMA_M,
};
use tirx_ir::lir::{LBinOp, LBufId, LExpr, LStmtKind, MatrixOp};
use tirx_ir::op::{self, Family, Slot};
use tirx_ir::{Arch, DType};
use tirx_layout::{ExecScope, Iter, TileLayout};

pub struct WgmmaAsync;

/// A shared operand: its descriptor fields and the start of every block.
#[derive(Clone, Debug)]
struct SmemPlan {
    buf: BufId,
    name: String,
    major: Major,
    swizzle: WgmmaSwizzle,
    lbo: u32,
    sbo: u32,
    /// Blocks along rows (64 for A, Nᵢ for B) and K.
    grid: [i64; 2],
    /// The constant start element of each block, row-major over the grid.
    starts: Vec<i64>,
    /// The symbolic part of the region start, in elements.
    sym: Affine,
}

impl SmemPlan {
    fn start(&self, u: i64, v: i64) -> i64 {
        self.starts[(u * self.grid[1] + v) as usize]
    }
}

enum APlan {
    Smem(SmemPlan),
    Regs(TileRegs),
}

/// `accum`: a constant, or a bool the warpgroup agrees on.
#[derive(Clone, Debug)]
enum Accum {
    Const(bool),
    Runtime(Expr),
}

struct WgPlan {
    kind: WgmmaKind,
    /// Instructions along M, N, K.
    tiles: [i64; 3],
    d: TileRegs,
    a: APlan,
    b: SmemPlan,
    accum: Accum,
}

impl Variant for WgmmaAsync {
    fn name(&self) -> &'static str {
        "wgmma"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Gemm
    }
    fn lowers(&self, op: TileOp) -> bool {
        op == TileOp::GemmAsync
    }
    fn min_arch(&self) -> Arch {
        WGMMA_ARCH
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(&[ExecScope::Warpgroup])?;
        if t != 128 {
            return Err(Decline::new(CommonRule::ExecScope, format!("a warpgroup of {t} threads; wgmma needs 128")));
        }
        let g = parse(cx)?;
        let accum = accum(cx)?;
        let (d, a_buf, b_buf) = (cx.buf(g.d.buf), cx.buf(g.a.buf), cx.buf(g.b.buf));
        scopes(d, a_buf, b_buf)?;
        let dm = fragment::matrix_operand(cx, g.d, "D", false, 4)?;
        let (m, n) = (dm.rows, dm.cols);
        let (ad, bd) = (dims_of(g.a, g.trans_a), dims_of(g.b, g.trans_b));
        let kk = ad.1;
        if ad.0 != m || bd.0 != n || bd.1 != kk {
            return Err(Decline::new(
                CommonRule::Operand,
                format!(
                    "shapes do not multiply: D {m}×{n}, A {}×{} (M×K), B {}×{} (N×K), after transA/transB",
                    ad.0, ad.1, bd.0, bd.1
                ),
            ));
        }
        let probe =
            WgmmaKind::new(8, a_buf.dtype, b_buf.dtype, d.dtype).map_err(|e| Decline::new(CommonRule::Dtype, e))?;
        let k = probe.k();
        if m % WGMMA_M != 0 || kk % k != 0 || n % 8 != 0 {
            return Err(Decline::new(
                CommonRule::Operand,
                format!("D {m}×{n} with K = {kk}: wgmma tiles M in 64s, K in {k}s ({}) and N in 8s", probe.a.ptx()),
            ));
        }
        let am = match a_buf.scope {
            MemScope::Local => Some(fragment::matrix_operand(cx, g.a, "A", g.trans_a, 4)?),
            _ => None,
        };
        // Widest instruction first; a width any operand cannot take (accumulator
        // fragment, shared descriptor, A fragment) is a limit, and a narrower one may fit.
        let mut limits: Vec<(Vec<i64>, String)> = vec![];
        let mut rule = Rule::from(GemmRule::Fragment);
        for ni in instruction_ns(n) {
            let kind = WgmmaKind::new(ni as u32, a_buf.dtype, b_buf.dtype, d.dtype)
                .map_err(|e| Decline::new(CommonRule::Dtype, e))?;
            let (dregs, a, b) = match operands_at(cx, &g, kind, &dm, am.as_ref(), k) {
                Ok(ops) => ops,
                Err(why) => {
                    // A reason the widths share (the same first clause: the same operand
                    // element at fault) is said once, in the widest's words, for all of them.
                    let head = |r: &str| r.split("; ").next().unwrap_or_default().to_string();
                    match limits.iter_mut().find(|(_, r)| head(r) == head(&why.reason)) {
                        Some((ns, _)) => ns.push(ni),
                        None => limits.push((vec![ni], why.reason)),
                    }
                    rule = why.rule;
                    continue;
                }
            };
            let tiles = [m / WGMMA_M, n / ni, kk / k];
            let p = WgPlan { kind, tiles, d: dregs, a, b, accum };
            let mut plan = Plan::new(summary(&p), ());
            plan.notes = notes(&p);
            plan.limits = width_limits(&limits);
            plan.data = Box::new(p);
            return Ok(plan);
        }
        Err(Decline::new(rule, width_limits(&limits).join("; ")))
    }

    fn emit(&self, plan: &Plan, _cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<WgPlan>("wgmma")?;
        let d = em.lbuf(p.d.buf)?.0;
        let [mt, nt, kt] = p.tiles;
        let first_scale = match &p.accum {
            Accum::Const(b) => LExpr::Bool(*b),
            Accum::Runtime(e) => {
                let v = em.expr(e)?;
                if em.builder().dtype_of(&v) == DType::Bool {
                    v
                } else {
                    let zero = LExpr::Int(0, em.builder().dtype_of(&v));
                    LExpr::bin(LBinOp::Ne, v, zero)
                }
            }
        };
        em.push(LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Fence)));
        for ki in 0..kt {
            for mi in 0..mt {
                for ni in 0..nt {
                    let a = match &p.a {
                        APlan::Smem(s) => WgmmaA::Smem(desc(em, s, mi, ki)?),
                        APlan::Regs(r) => WgmmaA::Regs {
                            buf: em.lbuf(r.buf)?.0,
                            index: r.at(mi, ki).iter().map(|&x| LExpr::i32(x)).collect(),
                        },
                    };
                    let b = desc(em, &p.b, ni, ki)?;
                    em.push(LStmtKind::Matrix(MatrixOp::Wgmma(Wgmma {
                        n: p.kind.n,
                        d,
                        d_index: p.d.at(mi, ni).iter().map(|&x| LExpr::i32(x)).collect(),
                        a,
                        b,
                        scale_d: if ki == 0 { first_scale.clone() } else { LExpr::Bool(true) },
                    })));
                }
            }
        }
        em.push(LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Commit)));
        Ok(())
    }
}

/// The accumulator, A and B of one instruction width `kind` (`k` per instruction).
fn operands_at(
    cx: &CallCx,
    g: &Call,
    kind: WgmmaKind,
    dm: &MatrixOperand,
    am: Option<&MatrixOperand>,
    k: i64,
) -> Result<(TileRegs, APlan, SmemPlan), Decline> {
    let dregs = acc_regs(kind, dm).map_err(|m| Decline::new(GemmRule::Fragment, m))?;
    let b = smem_plan(cx, g.b, "B", g.trans_b, (kind.n as i64, k), kind.b)?;
    let a = match am {
        Some(am) => APlan::Regs(a_regs_plan(kind, am).map_err(|m| Decline::new(GemmRule::Fragment, m))?),
        None => APlan::Smem(smem_plan(cx, g.a, "A", g.trans_a, (WGMMA_M, k), kind.a)?),
    };
    if let APlan::Regs(ar) = &a {
        aliasing(kind, &dregs, ar)?;
    }
    Ok((dregs, a, b))
}

/// The descriptor of block (u, v) of `s`: its start, plus the region's symbolic begin.
fn desc(em: &mut Emitter, s: &SmemPlan, u: i64, v: i64) -> Result<SmemDesc, Bug> {
    let buf = em.lbuf(s.buf)?.0;
    let index = s
        .sym
        .add_to(LExpr::i32(s.start(u, v)), &|v| em.env.var(v), em.builder(), DType::I32)
        .ok_or_else(|| Bug(format!("the begin of `{}` uses a variable not defined here", s.name)))?;
    Ok(SmemDesc { buf, index, major: s.major, swizzle: s.swizzle, lbo: s.lbo, sbo: s.sbo })
}

/// The call's operands by the op table's slots (D, A, B, SFA, SFB, transA, transB, accum).
struct Call<'a> {
    d: &'a BufferRegion,
    a: &'a BufferRegion,
    b: &'a BufferRegion,
    trans_a: bool,
    trans_b: bool,
}

/// `m64n256, m64n128: why` per distinct reason, widest first.
fn width_limits(limits: &[(Vec<i64>, String)]) -> Vec<String> {
    limits
        .iter()
        .map(|(ns, why)| {
            let names: Vec<String> = ns.iter().map(|n| format!("m64n{n}")).collect();
            format!("{}: {why}", names.join(", "))
        })
        .collect()
}

fn parse<'a>(cx: &CallCx<'a>) -> Result<Call<'a>, Decline> {
    let region = |slot: &Slot, name: &str| {
        cx.region(slot)
            .ok_or_else(|| Decline::new(CommonRule::Parse, format!("gemm_async operand {name} is not a buffer region")))
    };
    if cx.region(&op::SFA).is_some() || cx.region(&op::SFB).is_some() {
        return Err(Decline::new(
            CommonRule::Operand,
            "block-scaled gemm_async (SFA, SFB) is tcgen05's (sm_100a); wgmma has no scale factors",
        ));
    }
    Ok(Call {
        d: region(&op::ASYNC_D, "D")?,
        a: region(&op::GEMM_A, "A")?,
        b: region(&op::GEMM_B, "B")?,
        trans_a: cx.flag(&op::ASYNC_TRANS_A),
        trans_b: cx.flag(&op::ASYNC_TRANS_B),
    })
}

/// D in registers, B in shared memory, A in either.
fn scopes(d: &tirx_ir::hir::Buffer, a: &tirx_ir::hir::Buffer, b: &tirx_ir::hir::Buffer) -> Result<(), Decline> {
    if d.scope != MemScope::Local {
        return Err(Decline::new(
            CommonRule::OperandScope,
            format!("D `{}` is in {} memory; wgmma accumulates in registers (local)", d.name, d.scope.name()),
        ));
    }
    for (who, x, regs_ok) in [("A", a, true), ("B", b, false)] {
        if !(x.scope.is_shared() || (regs_ok && x.scope == MemScope::Local)) {
            return Err(Decline::new(
                CommonRule::OperandScope,
                format!(
                    "{who} `{}` is in {} memory; wgmma reads B from shared memory and A from shared memory or registers: stage it with `Tx.copy` first",
                    x.name,
                    x.scope.name()
                ),
            ));
        }
    }
    Ok(())
}

/// `accum=`: absent (false), a constant, or a bool (or int) uniform over the warpgroup.
fn accum(cx: &CallCx) -> Result<Accum, Decline> {
    let Some(e) = cx.scalar(&op::ASYNC_ACCUM) else { return Ok(Accum::Const(false)) };
    match &e.kind {
        ExprKind::Bool(b) => return Ok(Accum::Const(*b)),
        ExprKind::Int(v) => return Ok(Accum::Const(*v != 0)),
        _ => {}
    }
    if !(e.dtype == DType::Bool || e.dtype.is_int()) {
        return Err(Decline::new(
            GemmRule::Scalar,
            format!("accum is {}; it is a bool (or an int, nonzero = true)", e.dtype),
        ));
    }
    if cx.env.varies_within(cx.kernel, e, ExecScope::Warpgroup) {
        return Err(Decline::new(
            GemmRule::Scalar,
            "accum differs between the threads of the warpgroup; a wgmma's scale-d is one value for all of them",
        ));
    }
    Ok(Accum::Runtime(e.clone()))
}

/// (rows, cols) of a matrix region, its two dims above 1 swapped when `swap`.
fn dims_of(r: &BufferRegion, swap: bool) -> (i64, i64) {
    let e: Vec<i64> = r.ranges.iter().map(|g| g.extent).filter(|&x| x != 1).collect();
    let (a, b) = (e.first().copied().unwrap_or(1), e.get(1).copied().unwrap_or(1));
    if swap {
        (b, a)
    } else {
        (a, b)
    }
}

/// Instruction widths to try: multiples of 8 dividing `n`, at most 256, widest first.
fn instruction_ns(n: i64) -> Vec<i64> {
    (1..=32).rev().map(|i| 8 * i).filter(|w| n % w == 0).collect()
}

/// D's registers per 64×Nᵢ tile, in PTX order.
fn acc_regs(kind: WgmmaKind, dm: &MatrixOperand) -> Result<TileRegs, String> {
    let per = kind.acc_per_reg();
    let coord = |tid, r, e| kind.coord_d(tid, r, e);
    match_tiles(dm, (WGMMA_M, i64::from(kind.n)), kind.d_regs(), per, coord, "accumulator").map_err(|m| {
        format!(
            "{m}; the m64n{} accumulator of one tile is S[(4, 2, 8, {}, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)] over its 64×{} elements ({})",
            kind.n,
            kind.n / 8,
            kind.n,
            if per == 2 { "float16: column pairs share a 32-bit register" } else { "one float32 per register" }
        )
    })
}

/// Register A's four registers per 64×k tile.
fn a_regs_plan(kind: WgmmaKind, am: &MatrixOperand) -> Result<TileRegs, String> {
    let p = kind.a.per_reg();
    let coord = |tid, r, e| kind.coord_a(tid, r, e);
    match_tiles(am, (WGMMA_M, kind.k()), 4, p, coord, "A").map_err(|m| {
        format!(
            "{m}; one 64×{} A tile of the register form is, per warp, the mma.m16n8k{} A fragment: S[(4, 2, 8, 2, 4, {p}):(1@wid_in_wg, {p}, 4@laneid, {}, 1@laneid, 1)]",
            kind.k(),
            kind.k(),
            2 * p
        )
    })
}

/// Matches every `th × tw` tile of `x` to a fragment of `nregs` registers of
/// `per` elements: element `e` of register `r` of thread `tid` is `coord(tid, r, e)`
/// of the tile and must live in warp `tid / 32`, lane `tid % 32`, register
/// `base_r + e`, `base_r` a multiple of `per` and the same in every thread.
fn match_tiles(
    x: &MatrixOperand,
    (th, tw): (i64, i64),
    nregs: usize,
    per: usize,
    coord: impl Fn(usize, usize, usize) -> (usize, usize),
    what: &str,
) -> Result<TileRegs, String> {
    if x.rows % th != 0 || x.cols % tw != 0 {
        return Err(format!("{} `{}` is {}×{}, not whole {th}×{tw} tiles", x.role, x.name, x.rows, x.cols));
    }
    let grid = [x.rows / th, x.cols / tw];
    let mut regs = Vec::with_capacity((grid[0] * grid[1]) as usize);
    for u in 0..grid[0] {
        for v in 0..grid[1] {
            let mut tile = Vec::with_capacity(nregs);
            for r in 0..nregs {
                let mut base: Option<i64> = None;
                for tid in 0..128usize {
                    for e in 0..per {
                        let (rr, cc) = coord(tid, r, e);
                        let (i, j) = (u * th + rr as i64, v * tw + cc as i64);
                        let h = x.homes[(i * x.cols + j) as usize];
                        let reg_ok = match base {
                            Some(b) => h.reg == b + e as i64,
                            None => h.reg % per as i64 == 0,
                        };
                        let (w, l) = ((tid / 32) as i64, (tid % 32) as i64);
                        if h.warp != Some(w) || h.lane != l || !reg_ok {
                            let at = match h.warp {
                                Some(hw) => format!("warp {hw}, lane {}, register {}", h.lane, h.reg),
                                None => format!("lane {}, register {} of every warp", h.lane, h.reg),
                            };
                            let want = match base {
                                Some(b) => format!("register {}", b + e as i64),
                                None => format!("a register at a multiple of {per}"),
                            };
                            return Err(format!(
                                "{} `{}` is not the wgmma {what} fragment: its element ({i}, {j}), register {r} of tile ({u}, {v}), is in {at}; wgmma reads it from warp {w}, lane {l}, {want}",
                                x.role, x.name
                            ));
                        }
                        base = base.or(Some(h.reg));
                    }
                }
                tile.push(base.unwrap_or(0));
            }
            regs.push(tile);
        }
    }
    Ok(TileRegs { role: x.role, name: x.name.clone(), buf: x.buf, grid, regs })
}

/// D is written while register A is still read: no shared register.
fn aliasing(kind: WgmmaKind, d: &TileRegs, a: &TileRegs) -> Result<(), Decline> {
    if d.buf != a.buf {
        return Ok(());
    }
    let span =
        |t: &TileRegs, per: usize| -> Vec<i64> { t.regs.iter().flatten().flat_map(|&r| r..r + per as i64).collect() };
    let dset = span(d, kind.acc_per_reg());
    if span(a, kind.a.per_reg()).iter().any(|r| dset.contains(r)) {
        return Err(Decline::new(
            CommonRule::Operand,
            format!("D and A `{}` share registers: D is written while A is read", d.name),
        ));
    }
    Ok(())
}

/// The wgmma swizzle of a shared operand's layout, or why it has none.
fn wgmma_swizzle(
    s: Option<tirx_layout::Swizzle>,
    role: &str,
    b: &tirx_ir::hir::Buffer,
) -> Result<WgmmaSwizzle, Decline> {
    let Some(s) = s else { return Ok(WgmmaSwizzle::None) };
    let esize = i64::from(b.dtype.bytes());
    let chunk_ok = (1i64 << s.per_element) * esize == 16;
    WgmmaSwizzle::from_mode(s.swizzle_len).filter(|_| s.inner && s.atom_len == 3 && chunk_ok).ok_or_else(|| {
        Decline::new(
            GemmRule::Swizzle,
            format!(
                "{role} `{}` swizzles as ComposeLayout({}, {}, {}{}); wgmma XORs 16-byte chunks with the row in rows of 32, 64 or 128 bytes: ComposeLayout({}, 1..3, 3) for {} (what mma_shared_layout(\"{}\", mode, shape) builds)",
                b.name,
                s.per_element,
                s.swizzle_len,
                s.atom_len,
                if s.inner { "" } else { ", swizzle_inner=False" },
                (16 / esize).trailing_zeros(),
                b.dtype,
                b.dtype
            ),
        )
    })
}

/// A shared operand (`rows`, `k` per instruction): its descriptor and block starts.
fn smem_plan(
    cx: &CallCx,
    r: &BufferRegion,
    role: &str,
    transposed: bool,
    (rows, k): (i64, i64),
    ty: WgmmaIn,
) -> Result<SmemPlan, Decline> {
    let b = cx.buf(r.buf);
    let esize = i64::from(b.dtype.bytes());
    let mem = operand::memory(cx, r)?;
    operand::check_uniform(cx, r, b)?;
    let swizzle = wgmma_swizzle(mem.swizzle, role, b)?;
    let view = View::new(r, &mem.tile, transposed)
        .map_err(|m| Decline::new(CommonRule::Slice, format!("`{}`: {m}", b.name)))?;
    let grid = [view.rows / rows, view.cols / k];
    let majors: &[Major] = if ty.transposable() { &[Major::K, Major::MN] } else { &[Major::K] };
    let mut why = vec![];
    for &major in majors {
        match descriptor(&view, major, swizzle, esize, (rows, k), grid) {
            Ok((lbo, sbo, starts)) => {
                let sym = mem.sym.clone();
                let plan = SmemPlan { buf: r.buf, name: b.name.clone(), major, swizzle, lbo, sbo, grid, starts, sym };
                aligned(&plan, role, esize)?;
                return Ok(plan);
            }
            Err(m) => why.push(format!("as {} {}, {m}", major.name(), swizzle.name())),
        }
    }
    let shape = if role == "A" { "M×K, or K×M with transA" } else { "N×K, or K×N with transB" };
    Err(Decline::new(
        CommonRule::Layout,
        format!(
            "{role} `{}` is not a canonical wgmma tile: {}; lay it out with mma_shared_layout(\"{}\", mode, shape) as {shape}{}",
            b.name,
            why.join("; "),
            b.dtype,
            if ty.transposable() { "" } else { " (tf32 and fp8 are K-major only: K contiguous)" }
        ),
    ))
}

/// A shared region read as a logical rows × cols matrix of element offsets (before the swizzle).
struct View {
    rows: i64,
    cols: i64,
    base: i64,
    row_group: Vec<Iter>,
    col_group: Vec<Iter>,
}

impl View {
    fn new(r: &BufferRegion, tile: &TileLayout, transposed: bool) -> Result<View, String> {
        let ext: Vec<i64> = r.ranges.iter().map(|g| g.extent).collect();
        let dims: Vec<usize> = (0..ext.len()).filter(|&d| ext[d] != 1).collect();
        let [d0, d1] = dims[..] else { return Err(format!("a region of extents {ext:?} is not a matrix")) };
        let (grouped, seps) = tile.group(&ext).map_err(|e| e.to_string())?;
        let g = |d: usize| grouped.shard[seps[d]..seps[d + 1]].to_vec();
        let (rd, cd) = if transposed { (d1, d0) } else { (d0, d1) };
        Ok(View { rows: ext[rd], cols: ext[cd], base: crate::lay::m_offset(tile), row_group: g(rd), col_group: g(cd) })
    }

    /// The element offset of (row, col).
    fn at(&self, r: i64, c: i64) -> i64 {
        self.base + group_offset(&self.row_group, r) + group_offset(&self.col_group, c)
    }
}

/// The LBO, SBO (bytes) and block starts under which `major` + `swizzle`
/// addresses every element of every block of `v`, or the first element it does not.
fn descriptor(
    v: &View,
    major: Major,
    swizzle: WgmmaSwizzle,
    esize: i64,
    (rows, k): (i64, i64),
    grid: [i64; 2],
) -> Result<(u32, u32, Vec<i64>), String> {
    let t = 16 / esize;
    let w = swizzle.width();
    let step = |r: i64, c: i64| (v.at(r, c) - v.at(0, 0)) * esize;
    // The probes of docs/lir.md §2.11's table; an unused offset gets its dense value.
    let (lbo, sbo) = match (major, swizzle) {
        (Major::K, WgmmaSwizzle::None) => (step(0, t), if rows > 8 { step(8, 0) } else { 128 }),
        (Major::K, _) => (16, if rows > 8 { step(8, 0) } else { 8 * w }),
        (Major::MN, WgmmaSwizzle::None) => (step(0, 8), if rows > t { step(t, 0) } else { 128 }),
        (Major::MN, _) => (if rows > w / esize { step(w / esize, 0) } else { 16 * w }, step(0, 8)),
    };
    let max = i64::from(DESC_MAX_OFFSET);
    for (name, x) in [("leading", lbo), ("stride", sbo)] {
        if x < 0 || x % 16 != 0 || x > max {
            return Err(format!("it would need a {name} byte offset of {x}, not a multiple of 16 in 0..={max}"));
        }
    }
    let desc = SmemDesc { buf: LBufId(0), index: LExpr::i32(0), major, swizzle, lbo: lbo as u32, sbo: sbo as u32 };
    let mut starts = Vec::with_capacity((grid[0] * grid[1]) as usize);
    for u in 0..grid[0] {
        for q in 0..grid[1] {
            let start = v.at(u * rows, q * k);
            for i in 0..rows {
                for j in 0..k {
                    let (r, c) = (u * rows + i, q * k + j);
                    let want = start * esize + desc.offset(esize, i, j);
                    let got = v.at(r, c) * esize;
                    if got != want {
                        return Err(format!(
                            "a descriptor with LBO {lbo}, SBO {sbo} bytes reads its element ({r}, {c}) at element {}, but it is at element {}",
                            want.div_euclid(esize),
                            got / esize
                        ));
                    }
                }
            }
            starts.push(start);
        }
    }
    Ok((lbo as u32, sbo as u32, starts))
}

/// Every block starts 16-byte aligned and, swizzled, in the first row of a
/// pattern period; a symbolic begin moves it in whole periods.
fn aligned(p: &SmemPlan, role: &str, esize: i64) -> Result<(), Decline> {
    let period = p.swizzle.period();
    let mask = ((1i64 << p.swizzle.mode()) - 1) << 7;
    for (i, &s) in p.starts.iter().enumerate() {
        let byte = s * esize;
        if byte % 16 != 0 || byte & mask != 0 {
            let row = if mask != 0 {
                format!(" in the first row of a {period}-byte swizzle period (bits 7.. of the offset zero)")
            } else {
                String::new()
            };
            return Err(Decline::new(
                GemmRule::Alignment,
                format!(
                    "misaligned base: {role} `{}` block {i} starts at element {s} (byte {byte}); a {} wgmma descriptor starts at a multiple of 16 bytes{row}",
                    p.name,
                    p.swizzle.name(),
                ),
            ));
        }
    }
    let unit = p.sym.divisor().saturating_mul(esize);
    if !p.sym.is_zero() && unit % period != 0 {
        return Err(Decline::new(
            GemmRule::Alignment,
            format!(
                "misaligned base: the region begin of {role} `{}` moves it in steps of {} elements ({unit} bytes), not whole {period}-byte {} periods",
                p.name,
                p.sym.divisor(),
                if p.swizzle == WgmmaSwizzle::None { "core-matrix" } else { "swizzle" }
            ),
        ));
    }
    Ok(())
}

/// `wgmma.mma_async.m64n128k16.f32.bf16.bf16 (ss): 128×128×64 = 2×1×4 instructions; ...`.
fn summary(p: &WgPlan) -> String {
    let [mt, nt, kt] = p.tiles;
    let form = if matches!(p.a, APlan::Regs(_)) { "rs" } else { "ss" };
    let what = match &p.accum {
        Accum::Const(false) => "D = A·Bᵀ",
        Accum::Const(true) => "D = A·Bᵀ + D",
        Accum::Runtime(_) => "D = A·Bᵀ (+ D when accum)",
    };
    format!(
        "wgmma.mma_async.{} ({form}): {}×{}×{} = {mt}×{nt}×{kt} instructions; fence, {} wgmma, commit_group (wait with T.ptx.wgmma.wait_group); {what}",
        p.kind.ptx(),
        WGMMA_M * mt,
        i64::from(p.kind.n) * nt,
        p.kind.k() * kt,
        mt * nt * kt
    )
}

/// Per operand: registers or descriptor.
fn notes(p: &WgPlan) -> Vec<String> {
    let [mt, nt, kt] = p.tiles;
    let mut out = vec![format!(
        "wgmma.mma_async.sync.aligned.{} (sm_90a): M {mt} × N {nt} × K {kt} instructions of 64×{}×{}",
        p.kind.ptx(),
        p.kind.n,
        p.kind.k()
    )];
    let regs = |role: &str, t: &TileRegs, per: usize, what: &str, names: [&str; 2]| {
        format!(
            "{role} `{}`: {}×{} {what} fragments ({}, {}) at {}",
            t.name,
            t.grid[0],
            t.grid[1],
            names[0],
            names[1],
            describe(t, per, names)
        )
    };
    out.push(regs("D", &p.d, p.kind.acc_per_reg(), "accumulator", ["mt", "nt"]));
    match &p.a {
        APlan::Regs(r) => out.push(regs("A", r, p.kind.a.per_reg(), "register", ["mt", "kt"])),
        APlan::Smem(s) => out.push(smem_note("A", s, ["mt", "kt"])),
    }
    out.push(smem_note("B", &p.b, ["nt", "kt"]));
    out
}

/// `registers [0, 64) + 64·nt` when every tile's registers are one run (`per`
/// elements each) at affine bases, else the generic form.
fn describe(t: &TileRegs, per: usize, names: [&str; 2]) -> String {
    let per = per as i64;
    let run = |r: &[i64]| r.windows(2).all(|w| w[1] == w[0] + per);
    let base = t.regs[0][0];
    match affine_steps(t.grid, |u, v| t.at(u, v)[0], names) {
        Some(steps) if t.regs.iter().all(|r| run(r)) => {
            format!("registers [{base}, {}){steps}", base + per * t.regs[0].len() as i64)
        }
        _ => t.describe(names),
    }
}

/// ` + su·mt + sv·nt` when `at(u, v) = at(0, 0) + su·u + sv·v` over the `grid` (a term
/// per dimension of more than one block), else None.
fn affine_steps(grid: [i64; 2], at: impl Fn(i64, i64) -> i64, names: [&str; 2]) -> Option<String> {
    let base = at(0, 0);
    let step = |u: i64, v: i64| at(u, v) - base;
    let (su, sv) = (if grid[0] > 1 { step(1, 0) } else { 0 }, if grid[1] > 1 { step(0, 1) } else { 0 });
    if !(0..grid[0]).all(|u| (0..grid[1]).all(|v| step(u, v) == su * u + sv * v)) {
        return None;
    }
    let terms = [(su, names[0], grid[0]), (sv, names[1], grid[1])];
    Some(terms.iter().filter(|t| t.2 > 1).map(|(st, n, _)| format!(" + {st}·{n}")).collect())
}

/// `B `B_s`: shared, MN-major, 128B swizzle, LBO 8192 B, SBO 1024 B; 1×4 blocks (nt, kt) start at element 2048·kt`.
fn smem_note(role: &str, s: &SmemPlan, names: [&str; 2]) -> String {
    let unused = match (s.major, s.swizzle) {
        (Major::K, WgmmaSwizzle::None) | (Major::MN, _) => "",
        (Major::K, _) => " (unused)",
    };
    let at = match affine_steps(s.grid, |u, v| s.start(u, v), names) {
        Some(steps) => format!("{}{steps}", s.starts[0]),
        None => {
            let all: Vec<String> = s.starts.iter().map(|x| x.to_string()).collect();
            format!("[{}] (row-major blocks)", all.join(", "))
        }
    };
    let sym = if s.sym.is_zero() { "" } else { " + the region's symbolic begin" };
    format!(
        "{role} `{}`: shared, {}, {} swizzle, LBO {} B{unused}, SBO {} B; {}×{} blocks ({}, {}) start at element {at}{sym}",
        s.name,
        s.major.name(),
        s.swizzle.name(),
        s.lbo,
        s.sbo,
        s.grid[0],
        s.grid[1],
        names[0],
        names[1]
    )
}
