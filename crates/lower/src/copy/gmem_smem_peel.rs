//! copy → gmem_smem_peel (priority 12, docs/tile-primitives.md §3.18; not in the reference).
//!
//! **Accepts** a global ↔ shared copy (either direction) at thread, warp,
//! warpgroup or cta scope, all threads active, that the `[outer, threads, vec]`
//! and chunk splits (§3.2, §3.8) move in vectors narrower than 16 bytes because
//! one side is misaligned — a 60×100 f16 tile of a CTA at an odd column (rows of
//! 200 B start 8 bytes past a 16-byte boundary for odd `bx`), or shared rows
//! 360 B apart — when the region is rows of one contiguous run on both sides
//! (global stride 1, shared stride 1), every global row starts at the same
//! misalignment (the global row strides are multiples of 16 bytes) and each row
//! holds at least one aligned 16-byte vector. The shared side is not swizzled.
//! Declines with `not_wider` when the plain splits already move 16-byte vectors.
//!
//! **Algorithm**: the global width is chosen alone: 16 bytes. The rows'
//! misalignment `mis` (bytes past a 16-byte boundary) is the region offset plus
//! the symbolic begin; when the begin's step is not a multiple of 16 bytes it
//! takes several values, known only at run time (`bx * 100` f16: 0 or 8), and
//! each gets its own static plan, selected by an `if` on `mis` (uniform over the
//! CTA). For one `mis`, each row splits into a head of `(16 - mis) mod 16` bytes,
//! `body` aligned 16-byte vectors and a tail. Body vectors `c = f·T + t` (row
//! `c / body`, vector `c % body`) are dealt round-robin like §3.8: one 16-byte
//! global access each, and on the shared side one access when it is 16-byte
//! aligned, else `16 / ws` accesses of `ws` bytes (the widest width every
//! vector's shared address is a multiple of) through a register stage. Heads and
//! tails are then dealt to the threads the last body round left idle, each moved
//! in the widest units both sides' alignments allow.
//!
//! **Generated code** (60×100 f16 on 128 threads, `A[by*60 : …, bx*100 : …]`):
//! ```text
//! let mis: int32 = ((by * 240000 + bx * 100) * 2) % 16
//! if mis == 0 {
//!   for f in 0..5 { let c = f * 128 + tid; vcopy<8> stage[0] <- A[(c / 12) * 4000 + (c % 12) * 8 + …]
//!                   vcopy<4> A_smem[(c / 12) * 100 + (c % 12) * 8] <- stage[0]; vcopy<4> … <- stage[4] }
//!   if tid < 80 { … }                                  // the last body round
//!   let i = (tid + 48) % 128; if i < 60 { vcopy<4> A_smem[i * 100 + 96] <- A[…] }   // tails
//! } else {
//!   …                                                  // 8-byte heads, then the vectors
//! }
//! ```

use super::call::CopyRule;
use super::call::{add_sym, bind, copy_stmt, operands, scope_pair, thread_id, CopyOps, GsOperands, GLOBAL_SHARED};
use super::partition::{self, Partition};
use crate::addr::dim_offset;
use crate::lay;
use crate::operand::MemOperand;
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::lir::{LBinOp, LBufId, LExpr, LStmt, LStmtKind};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::Iter;

pub struct GmemSmemPeel;

/// The global width of a body vector, in bytes.
const VEC_BYTES: i64 = 16;

/// The region as rows: each row one contiguous run of `len` elements on both sides.
#[derive(Clone, Debug)]
struct Rows {
    /// The iters of the row index on each side (outermost first, one order).
    g_outer: Vec<Iter>,
    s_outer: Vec<Iter>,
    rows: i64,
    len: i64,
}

/// The plan for one value of the global rows' misalignment.
#[derive(Clone, Debug, PartialEq)]
struct Case {
    /// Bytes past a 16-byte boundary at which every global row starts.
    mis: i64,
    /// Elements before the first aligned vector, vectors, elements after them.
    head: i64,
    body: i64,
    tail: i64,
    /// Bytes per shared access of a body vector (16: one access, no stage).
    ws: i64,
    /// Bytes per access of the head and of the tail.
    head_unit: i64,
    tail_unit: i64,
}

struct PeelPlan {
    g: MemOperand,
    s: MemOperand,
    g_is_src: bool,
    threads: i64,
    esize: i64,
    rows: Rows,
    cases: Vec<Case>,
}

impl PeelPlan {
    /// Elements per 16-byte vector.
    fn vec(&self) -> i64 {
        VEC_BYTES / self.esize
    }
}

/// A DRAM sector (32 bytes): sectors written partly by two CTAs are slow on an H100.
const SECTOR: i64 = 32;

impl Variant for GmemSmemPeel {
    fn name(&self) -> &'static str {
        "gmem_smem_peel"
    }
    fn priority(&self) -> u8 {
        12
    }
    fn family(&self) -> Family {
        Family::Copy
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(crate::variant::COOPERATIVE_SCOPES)?;
        let ops = operands(cx)?;
        scope_pair(&ops, GLOBAL_SHARED)?;
        let o = GsOperands::resolve(cx, &ops)?;
        let n = CopyOps::elems(ops.src);
        let (plain, plain_rounds) = plain_split(&o, t, n);
        if plain >= VEC_BYTES {
            return Err(Decline::new(
                CopyRule::NotWider,
                format!("the plain split already moves {plain}-byte vectors: nothing to peel"),
            ));
        }
        if o.s.swizzle.is_some() {
            return Err(Decline::new(
                CopyRule::Swizzle,
                "the shared side is swizzled; rows are peeled on plain layouts only",
            ));
        }
        let rows = rows(&o)?;
        let cases = cases(&o, &rows)?;
        // Worth it only with a quarter fewer global accesses per thread than the plain split.
        let loads = cases.iter().map(|c| global_accesses(c, &rows, t, o.elem_bytes)).max().unwrap_or(0);
        if 4 * loads >= 3 * plain_rounds {
            return Err(Decline::new(
                CopyRule::NotWider,
                format!(
                    "{loads} global accesses per thread against the plain split's {plain_rounds} of {plain} B: not a quarter fewer"
                ),
            ));
        }
        let GsOperands { g, s, g_is_src, elem_bytes } = o;
        let p = PeelPlan { g, s, g_is_src, threads: t, esize: elem_bytes, rows, cases };
        let rounds = p.cases.iter().map(|c| rounds(p.rows.rows * c.body, t)).max().unwrap_or(0);
        let summary = format!(
            "16 B global × {t} threads (was {plain} B), {} rows of {} B: {}",
            p.rows.rows,
            p.rows.len * p.esize,
            p.cases.iter().map(|c| case_text(c, p.esize, p.rows.rows)).collect::<Vec<_>>().join("; ")
        );
        let mut limits = vec![];
        if p.cases.len() > 1 {
            limits.push(format!(
                "the global rows start {} bytes past a 16-byte boundary depending on the region begin: one plan each, chosen at run time",
                p.cases.iter().map(|c| c.mis.to_string()).collect::<Vec<_>>().join(" or ")
            ));
        }
        for c in p.cases.iter().filter(|c| c.ws < VEC_BYTES) {
            limits.push(format!(
                "shared: with the rows {} bytes off, each 16-byte vector lands on a {}-byte boundary: {} stores of {} B",
                c.mis,
                c.ws,
                VEC_BYTES / c.ws,
                c.ws
            ));
        }
        let row_bytes = p.rows.len * p.esize;
        if !p.g_is_src && (row_bytes % SECTOR != 0 || p.cases.iter().any(|c| c.mis != 0)) {
            // Not a choice this variant can change: a copy writes exactly its region.
            limits.push(format!(
                "global: rows of {row_bytes} B do not cover whole 32-byte sectors; the sectors at their ends may be \
                 shared with the neighbouring tiles' CTAs, and such partial-sector writes are slow on an H100 (the \
                 60 x 100 f16 tiling stores at 0.61 of a flat store; README, Performance): tile rows of a multiple \
                 of 32 bytes avoid them"
            ));
        }
        let mut plan = Plan::new(summary, p);
        plan.vec = Some((VEC_BYTES / elem_bytes) as u32);
        plan.rounds = Some(rounds as u64);
        plan.limits = limits;
        Ok(plan)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<PeelPlan>("gmem_smem_peel")?;
        let ops = operands(cx)?;
        let (g_reg, s_reg) = GsOperands::regions(p.g_is_src, &ops);
        let (gb, g_ity) = em.lbuf(g_reg.buf)?;
        let (sb, s_ity) = em.lbuf(s_reg.buf)?;
        let dtype = cx.buf(g_reg.buf).dtype;
        let tid = thread_id(cx, em, p.threads);
        let stage = p.cases.iter().any(|c| c.ws < VEC_BYTES).then(|| em.local_buf("stage", dtype, p.vec()));
        let sides = Sides { gb, g_ity, sb, s_ity, stage };
        let mut bodies = vec![];
        for c in &p.cases {
            bodies.push(case_stmts(em, p, &sides, c, &tid)?);
        }
        let Some(last) = bodies.pop() else { return Err(Bug("gmem_smem_peel planned no case".into())) };
        if bodies.is_empty() {
            em.stmts.extend(last);
            return Ok(());
        }
        // mis = ((offset + symbolic begin) * elem bytes) % 16, the same in every thread of the call.
        let start = add_sym(em, LExpr::Int(lay::m_offset(&p.g.tile), g_ity), &p.g.sym, g_ity)?;
        let b = em.builder();
        let mis = b.rem_c(b.mul(start, LExpr::Int(p.esize, g_ity)), VEC_BYTES);
        let v = em.var("mis", g_ity, Some((0, VEC_BYTES - 1)));
        em.push(LStmtKind::Let { var: v, value: mis });
        let mut chain = last;
        for (c, body) in p.cases.iter().zip(bodies).rev() {
            let cond = LExpr::bin(LBinOp::Eq, LExpr::Var(v), LExpr::Int(c.mis, g_ity));
            chain = vec![LStmt::new(LStmtKind::If { cond, then_body: body, else_body: chain }, em.span)];
        }
        em.stmts.extend(chain);
        Ok(())
    }
}

/// What the plain splits reach: the vector width in bytes and the rounds (one
/// global access each) per thread — gmem_smem's exact split when the region
/// divides over the threads and one exists, else gmem_smem_predicated's chunks.
fn plain_split(o: &GsOperands, t: i64, n: i64) -> (i64, i64) {
    if n % t == 0 {
        if let (p @ Partition::Grid { .. }, _) = partition::align(&o.sides(t)) {
            return (p.vec() * o.elem_bytes, p.rounds());
        }
    }
    let (p, _) = partition::align(&o.sides(1));
    (p.vec() * o.elem_bytes, rounds(p.rounds(), t))
}

/// Global accesses per thread of one case: a body round is one, a round of
/// heads and tails as many as its widest segment has units.
fn global_accesses(c: &Case, rows: &Rows, t: i64, e: i64) -> i64 {
    let body = rounds(rows.rows * c.body, t);
    let segs = i64::from(c.head > 0) + i64::from(c.tail > 0);
    let units = (c.head * e / c.head_unit).max(c.tail * e / c.tail_unit);
    body + rounds(rows.rows * segs, t) * units
}

/// The region as rows of one contiguous run on both sides, each global row at the
/// same misalignment.
fn rows(o: &GsOperands) -> Result<Rows, Decline> {
    let no = |why: String| Decline::new(CopyRule::Partition, why);
    let (g, s) = partition::global_order(&o.sides(1))
        .ok_or_else(|| no("the shared layout cannot follow the global iters".into()))?;
    let Some((&last, outer)) = g.split_last() else { return Err(no("an empty region".into())) };
    if last.stride != 1 {
        return Err(no(format!("the global elements are not contiguous (innermost stride {})", last.stride)));
    }
    let ext: Vec<i64> = g.iter().map(|i| i.extent).collect();
    let (sg, seps) =
        lay::group(&s, &ext).ok_or_else(|| no("the shared layout does not split as the global rows".into()))?;
    let k = ext.len() - 1;
    if lay::canon(&sg[seps[k]..seps[k + 1]]) != [Iter::m(last.extent, 1)] {
        return Err(no(format!("a row of {} elements is not contiguous in shared memory", last.extent)));
    }
    if let Some(it) = outer.iter().find(|it| it.extent > 1 && (it.stride * o.elem_bytes) % VEC_BYTES != 0) {
        return Err(Decline::new(
            CopyRule::Alignment,
            format!(
                "global rows {} B apart start at different alignments (a row pitch that is a multiple of 16 B peels the same way every row)",
                it.stride * o.elem_bytes
            ),
        ));
    }
    let rows = outer.iter().map(|i| i.extent).product();
    Ok(Rows { g_outer: outer.to_vec(), s_outer: sg[..seps[k]].to_vec(), rows, len: last.extent })
}

/// One case per value the global misalignment can take.
fn cases(o: &GsOperands, rows: &Rows) -> Result<Vec<Case>, Decline> {
    let e = o.elem_bytes;
    let c0 = lay::m_offset(&o.g.tile) * e;
    // The symbolic begin moves the start in steps of gcd(16, its divisor in bytes).
    let q = if o.g.sym.is_zero() { VEC_BYTES } else { gcd(VEC_BYTES, o.g.sym.divisor() * e) };
    let mut mis: Vec<i64> = (0..VEC_BYTES / q).map(|k| (c0 + k * q).rem_euclid(VEC_BYTES)).collect();
    mis.sort_unstable();
    mis.dedup();
    // Every shared row starts on a multiple of `sa` bytes.
    let mut sa = gcd(VEC_BYTES, lay::m_offset(&o.s.tile) * e);
    for it in rows.s_outer.iter().filter(|i| i.extent > 1) {
        sa = gcd(sa, it.stride * e);
    }
    if !o.s.sym.is_zero() {
        sa = gcd(sa, o.s.sym.divisor() * e);
    }
    let lb = rows.len * e;
    let mut out = vec![];
    for m in mis {
        let hb = ((VEC_BYTES - m) % VEC_BYTES).min(lb);
        let body = (lb - hb) / VEC_BYTES;
        if body == 0 {
            return Err(Decline::new(
                CopyRule::Partition,
                format!("a row of {lb} B starting {m} B past a 16-byte boundary holds no aligned 16-byte vector"),
            ));
        }
        let tb = lb - hb - body * VEC_BYTES;
        let ws = pow2(gcd(sa, hb));
        if ws < 4 {
            return Err(Decline::new(
                CopyRule::Alignment,
                format!("with the rows {m} B off, a 16-byte vector lands on a {ws}-byte shared boundary: {} shared accesses per vector", VEC_BYTES / ws),
            ));
        }
        out.push(Case {
            mis: m,
            head: hb / e,
            body,
            tail: tb / e,
            ws,
            head_unit: pow2(gcd(gcd(hb, m), sa)),
            tail_unit: pow2(gcd(tb, ws)),
        });
    }
    Ok(out)
}

/// `rows 8 B off: 8 B heads, 12 × 16 B, no tail` for explain.
fn case_text(c: &Case, e: i64, rows: i64) -> String {
    let head = if c.head > 0 { format!("{} B heads, ", c.head * e) } else { String::new() };
    let tail = if c.tail > 0 { format!(", {} B tails", c.tail * e) } else { String::new() };
    let shared = if c.ws < VEC_BYTES { format!(" (shared {} × {} B)", VEC_BYTES / c.ws, c.ws) } else { String::new() };
    format!("at {} B off: {head}{} × 16 B{shared}{tail} per row, {} vectors", c.mis, c.body, rows * c.body)
}

/// The flat arrays and index types of both sides, and the register stage.
struct Sides {
    gb: LBufId,
    g_ity: DType,
    sb: LBufId,
    s_ity: DType,
    stage: Option<LBufId>,
}

/// The statements of one case: the body vectors, then the heads and tails.
fn case_stmts(em: &mut Emitter, p: &PeelPlan, sd: &Sides, c: &Case, tid: &LExpr) -> Result<Vec<LStmt>, Bug> {
    let t = p.threads;
    let mut out = vec![];
    let items = p.rows.rows * c.body;
    dealt(em, &mut out, items, t, tid, 0, &mut |em, i| body_vector(em, p, sd, c, i))?;
    let mut segs = vec![];
    if c.head > 0 {
        segs.push((0, c.head, c.head_unit));
    }
    if c.tail > 0 {
        segs.push((c.head + c.body * p.vec(), c.tail, c.tail_unit));
    }
    let r = p.rows.rows;
    let nseg = segs.len() as i64 * r;
    // Segments start at the first thread the last body round left idle.
    let off = items % t;
    dealt(em, &mut out, nseg, t, tid, off, &mut |em, i| match segs.as_slice() {
        [(start, len, unit)] => segment(em, p, sd, i, *start, *len, *unit),
        // Heads are items 0..rows, tails rows..2·rows.
        [(hs, hl, hu), (ts, tl, tu)] => {
            let head = segment(em, p, sd, i.clone(), *hs, *hl, *hu)?;
            let row = em.builder().add(i.clone(), LExpr::i32(-r));
            let tail = segment(em, p, sd, row, *ts, *tl, *tu)?;
            let cond = LExpr::bin(LBinOp::Lt, i, LExpr::i32(r));
            Ok(vec![LStmt::new(LStmtKind::If { cond, then_body: head, else_body: tail }, em.span)])
        }
        _ => Err(Bug(format!("{} peeled segments per row", segs.len()))),
    })?;
    Ok(out)
}

/// The statements of item `i` (an `I32` expression).
type ItemFn<'a> = dyn FnMut(&mut Emitter, LExpr) -> Result<Vec<LStmt>, Bug> + 'a;

/// Items `0..items` dealt round-robin: item `f·T + ((tid - off) mod T)` to thread
/// `tid` in round `f`, the last round guarded. `f(em, i)` gives the statements of item `i`.
fn dealt(
    em: &mut Emitter,
    out: &mut Vec<LStmt>,
    items: i64,
    t: i64,
    tid: &LExpr,
    off: i64,
    f: &mut ItemFn,
) -> Result<(), Bug> {
    if items == 0 {
        return Ok(());
    }
    let b = em.builder();
    let slot = if off == 0 { tid.clone() } else { b.rem_c(b.add(tid.clone(), LExpr::i32(t - off)), t) };
    let slot = if matches!(slot, LExpr::Var(_) | LExpr::Int(..)) {
        slot
    } else {
        let v = em.var("slot", DType::I32, Some((0, t - 1)));
        out.push(LStmt::new(LStmtKind::Let { var: v, value: slot }, em.span));
        LExpr::Var(v)
    };
    let (full, rest) = (items / t, items % t);
    let item = |em: &mut Emitter, base: LExpr, hi: i64| -> Result<(LExpr, Vec<LStmt>), Bug> {
        let e = em.builder().add(base, slot.clone());
        if matches!(e, LExpr::Var(_) | LExpr::Int(..)) {
            return Ok((e, vec![]));
        }
        let v = em.var("i", DType::I32, Some((0, hi)));
        Ok((LExpr::Var(v), vec![LStmt::new(LStmtKind::Let { var: v, value: e }, em.span)]))
    };
    if full == 1 {
        let (i, mut body) = item(em, LExpr::i32(0), items - 1)?;
        body.extend(f(em, i)?);
        out.extend(body);
    } else if full > 1 {
        let fv = em.var("f", DType::I32, Some((0, full - 1)));
        let base = em.builder().mul(LExpr::Var(fv), LExpr::i32(t));
        let (i, mut body) = item(em, base, items - 1)?;
        body.extend(f(em, i)?);
        out.push(LStmt::new(
            LStmtKind::For { var: fv, begin: LExpr::i32(0), extent: LExpr::i32(full), unroll: false, body },
            em.span,
        ));
    }
    if rest > 0 {
        let (i, mut body) = item(em, LExpr::i32(full * t), items - 1)?;
        body.extend(f(em, i)?);
        let cond = LExpr::bin(LBinOp::Lt, slot, LExpr::i32(rest));
        out.push(LStmt::new(LStmtKind::If { cond, then_body: body, else_body: vec![] }, em.span));
    }
    Ok(())
}

/// Element offsets of `(row, col)` on both sides (the region's start included).
fn offsets(em: &mut Emitter, p: &PeelPlan, sd: &Sides, row: &LExpr, col: LExpr) -> Result<(LExpr, LExpr), Bug> {
    let b = em.builder();
    let side = |outer: &[Iter], tile: &tirx_layout::TileLayout, ity: DType| {
        let r = dim_offset(b, outer, b.to_int(row.clone(), ity));
        b.add(b.add(r, LExpr::Int(lay::m_offset(tile), ity)), b.to_int(col.clone(), ity))
    };
    let g = side(&p.rows.g_outer, &p.g.tile, sd.g_ity);
    let s = side(&p.rows.s_outer, &p.s.tile, sd.s_ity);
    Ok((add_sym(em, g, &p.g.sym, sd.g_ity)?, add_sym(em, s, &p.s.sym, sd.s_ity)?))
}

/// Body vector `i`: row `i / body`, 16 bytes at `head + (i % body)·vec`.
fn body_vector(em: &mut Emitter, p: &PeelPlan, sd: &Sides, c: &Case, i: LExpr) -> Result<Vec<LStmt>, Bug> {
    let b = em.builder();
    let (row, j) = (b.div_c(i.clone(), c.body), b.rem_c(i, c.body));
    let col = b.add(b.mul(j, LExpr::i32(p.vec())), LExpr::i32(c.head));
    let (g, s) = offsets(em, p, sd, &row, col)?;
    let mut out = vec![];
    let g = bind(em, &mut out, "g_off", g);
    let s = bind(em, &mut out, "s_off", s);
    let v = p.vec() as u32;
    let (gb, sb) = (sd.gb, sd.sb);
    match sd.stage.filter(|_| c.ws < VEC_BYTES) {
        None if p.g_is_src => out.push(copy_stmt(em, sb, s, gb, g, v)),
        None => out.push(copy_stmt(em, gb, g, sb, s, v)),
        Some(stage) => {
            let w = c.ws / p.esize;
            let parts = (0..p.vec() / w).map(|u| (u * w, em.builder().add(s.clone(), LExpr::i32(u * w))));
            let parts: Vec<(i64, LExpr)> = parts.collect();
            if p.g_is_src {
                out.push(copy_stmt(em, stage, LExpr::i32(0), gb, g, v));
                for (k, si) in parts {
                    out.push(copy_stmt(em, sb, si, stage, LExpr::i32(k), w as u32));
                }
            } else {
                for (k, si) in parts {
                    out.push(copy_stmt(em, stage, LExpr::i32(k), sb, si, w as u32));
                }
                out.push(copy_stmt(em, gb, g, stage, LExpr::i32(0), v));
            }
        }
    }
    Ok(out)
}

/// Elements `start .. start + len` of `row`, in units of `unit` bytes.
fn segment(
    em: &mut Emitter,
    p: &PeelPlan,
    sd: &Sides,
    row: LExpr,
    start: i64,
    len: i64,
    unit: i64,
) -> Result<Vec<LStmt>, Bug> {
    let w = unit / p.esize;
    let mut out = vec![];
    let (g, s) = offsets(em, p, sd, &row, LExpr::i32(start))?;
    let (g, s) = if len > w { (bind(em, &mut out, "g_off", g), bind(em, &mut out, "s_off", s)) } else { (g, s) };
    for k in (0..len).step_by(w as usize) {
        let b = em.builder();
        let (gi, si) = (b.add(g.clone(), LExpr::Int(k, sd.g_ity)), b.add(s.clone(), LExpr::Int(k, sd.s_ity)));
        out.push(if p.g_is_src {
            copy_stmt(em, sd.sb, si, sd.gb, gi, w as u32)
        } else {
            copy_stmt(em, sd.gb, gi, sd.sb, si, w as u32)
        });
    }
    Ok(out)
}

fn rounds(items: i64, t: i64) -> i64 {
    (items + t - 1) / t
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// The largest power of two dividing `x`, at most 16 (`x = 0`: 16).
fn pow2(x: i64) -> i64 {
    if x == 0 {
        VEC_BYTES
    } else {
        (x & x.wrapping_neg()).min(VEC_BYTES)
    }
}
