//! gemm → mma.m16n8k* (priority 10, docs/tile-primitives.md §3.9).
//!
//! **Accepts** `Tx.warp.gemm(D, A, B, C, transpose_A, transpose_B, alpha,
//! beta)` — and the warpgroup and cta scopes where every warp computes its
//! own tiles — with every thread of the scope active in whole warps
//! (`all_threads_active`, `exec_scope`), all four operands in registers
//! (`operand_scope`), `alpha` absent or 1 and `beta` absent, 0 or 1 as
//! compile-time constants (`scalar`), element types of an `mma.sync` form
//! (`dtype`; docs/lir.md §2.8: f16/bf16 → f32 with m16n8k16 then m16n8k8,
//! f32 as tf32 with m16n8k8, s8/u8 → s32 with m16n8k32), a target that has
//! it (`arch`), no operand replicated over threads (`replicated`), and operand
//! layouts that are the instruction's fragments (`fragment`). D must not
//! share registers with A or B, nor with C at other elements (`operand`).
//!
//! **Algorithm** (all in `plan`): every element of each operand gets its home
//! — warp, lane, register — from its layout (transposes applied); D's homes
//! give each warp's tile, and every warp must hold its rows of A, its columns
//! of B and its tile of C at the same lanes and registers as warp 0
//! (`gemm::fragment`). Then, per candidate shape (k16 before k8), the warp
//! tile must divide into 16×8×k instruction tiles and every tile of every
//! operand must be exactly the PTX fragment; the result is the register index
//! of every fragment register of every tile. `tirx explain` shows the chosen
//! instruction, the tile counts and, per operand, the register formula of its
//! tiles (`match:` lines); a shape that did not fit is a `limit:` line.
//!
//! **Generated code**: `beta = 0` zeroes D's registers; then for every K
//! tile, every (M, N) tile: one `mma.sync` accumulating into D in place, the
//! first reading C when `beta = 1` (no copy). Register indices are constants
//! (the statements are unrolled here), so the CUDA keeps every operand in
//! registers. For a 16×8×16 f16 call:
//!
//! ```text
//! acc[0] = 0.0
//! ...
//! mma.m16n8k16.row.col.f32.f16.f16.f32 {acc[0], acc[1], acc[2], acc[3]} = {a[0], a[2], a[4], a[6]} * {b[0], b[2]} + {acc[0], acc[1], acc[2], acc[3]}
//! ```
//!
//! Differences from the reference: the fragment check reads every element's
//! home instead of grouping layouts, so it names the first misplaced element;
//! everything is decided in `plan` (the reference asserts on shape mismatches
//! and fails at emit); tf32 and int8 forms exist; D may not silently overwrite
//! registers A, B or C still read.

use super::call::GemmRule;
use super::call::{parse, GemmCall};
use super::fragment::{self, Local, MatrixOperand, TileRegs};
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::MemScope;
use tirx_ir::lir::{LExpr, LStmtKind, MatrixOp, MemOp, Mma, MmaKind, MmaOperand, MmaShape};
use tirx_ir::op::{Family, TileOp};
use tirx_ir::{Arch, DType};
use tirx_layout::ExecScope;

pub struct MmaSync;

/// Everything emit needs.
struct MmaPlan {
    kind: MmaKind,
    /// `beta = 1`: the first K step reads C.
    accumulate: bool,
    /// Instruction tiles per warp along M, N, K.
    tiles: [i64; 3],
    d: TileRegs,
    a: TileRegs,
    b: TileRegs,
    c: TileRegs,
}

impl Variant for MmaSync {
    fn name(&self) -> &'static str {
        "mma.m16n8k*"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Gemm
    }
    fn lowers(&self, op: TileOp) -> bool {
        op == TileOp::Gemm
    }
    /// The oldest form (`m16n8k8` on f16) exists from sm_75; the others need sm_80 (checked in `plan`).
    fn min_arch(&self) -> Arch {
        Arch::SM_75
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(&[ExecScope::Warp, ExecScope::Warpgroup, ExecScope::Cta])?;
        if t <= 0 || t % 32 != 0 {
            return Err(Decline::new(
                CommonRule::ExecScope,
                format!("the {} scope has {t} threads; mma.sync needs whole warps", cx.scope.kind),
            ));
        }
        let warps = t / 32;
        let g = parse(cx)?;
        scalars(&g)?;
        // C is read only when beta = 1; with beta = 0 it is not an operand of the instruction.
        let accumulate = g.beta == Some(1.0);
        scopes(cx, &g, accumulate)?;
        let kinds = forms(cx, &g)?;
        let d = fragment::matrix_operand(cx, g.d, "D", false, warps)?;
        let a = fragment::matrix_operand(cx, g.a, "A", g.transpose_a, warps)?;
        let b = fragment::matrix_operand(cx, g.b, "B", g.transpose_b, warps)?;
        let c = if accumulate { Some(fragment::matrix_operand(cx, g.c, "C", false, warps)?) } else { None };
        shapes(&d, &a, &b, c.as_ref())?;
        let locals = per_warp(&d, &a, &b, c.as_ref(), warps)?;
        let mut limits = Vec::new();
        for kind in kinds {
            match fit(kind, &locals, accumulate) {
                Ok(p) => {
                    aliasing(&p)?;
                    let spread: Vec<&str> = [Some(&d), Some(&a), Some(&b), c.as_ref()]
                        .into_iter()
                        .flatten()
                        .filter(|o| o.homes.iter().any(|h| h.warp.is_some()))
                        .map(|o| o.role)
                        .collect();
                    let c_name = &cx.buf(g.c.buf).name;
                    let (text, notes) = (summary(&p, warps), notes(&p, &spread, warps, c_name));
                    let mut plan = Plan::new(text, p);
                    plan.notes = notes;
                    plan.limits = limits;
                    return Ok(plan);
                }
                Err(why) => limits.push(format!("{}: {why}", kind.shape.name())),
            }
        }
        Err(Decline::new(GemmRule::Fragment, limits.join("; ")))
    }

    fn emit(&self, plan: &Plan, _cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<MmaPlan>("mma.m16n8k*")?;
        let (d, a, b, c) = (em.lbuf(p.d.buf)?.0, em.lbuf(p.a.buf)?.0, em.lbuf(p.b.buf)?.0, em.lbuf(p.c.buf)?.0);
        let [mt, nt, kt] = p.tiles;
        let ix = |regs: &[i64]| regs.iter().map(|&r| LExpr::i32(r)).collect::<Vec<_>>();
        if !p.accumulate {
            let zero = if p.kind.acc == DType::I32 { LExpr::Int(0, DType::I32) } else { LExpr::Float(0.0, DType::F32) };
            for r in p.d.regs.iter().flatten() {
                em.push(LStmtKind::Memory(MemOp::Store { buf: d, index: LExpr::i32(*r), value: zero.clone() }));
            }
        }
        // K outermost: consecutive instructions write different accumulators.
        for k in 0..kt {
            for m in 0..mt {
                for n in 0..nt {
                    let (acc, acc_regs) = if k == 0 && p.accumulate { (c, p.c.at(m, n)) } else { (d, p.d.at(m, n)) };
                    em.push(LStmtKind::Matrix(MatrixOp::Mma(Mma {
                        shape: p.kind.shape,
                        d,
                        d_index: ix(p.d.at(m, n)),
                        a,
                        a_index: ix(p.a.at(m, k)),
                        b,
                        b_index: ix(p.b.at(k, n)),
                        c: acc,
                        c_index: ix(acc_regs),
                    })));
                }
            }
        }
        Ok(())
    }
}

/// `alpha` must be 1 and `beta` 0 or 1: `mma.sync` computes `A·B + C` and nothing scales it.
fn scalars(g: &GemmCall) -> Result<(), Decline> {
    match g.alpha {
        Some(1.0) => {}
        Some(a) => {
            return Err(Decline::new(
                GemmRule::Scalar,
                format!("alpha = {a}: mma.sync computes A·B + C unscaled; only alpha = 1 (or absent) is supported"),
            ))
        }
        None => {
            return Err(Decline::new(
                GemmRule::Scalar,
                "alpha is not a compile-time constant; only alpha = 1 is supported",
            ))
        }
    }
    match g.beta {
        Some(b) if b == 0.0 || b == 1.0 => Ok(()),
        Some(b) => Err(Decline::new(
            GemmRule::Scalar,
            format!("beta = {b}: only beta = 0 (D = A·B) or beta = 1 (D = A·B + C) is supported; scale C first with an elementwise op"),
        )),
        None => Err(Decline::new(GemmRule::Scalar, "beta is not a compile-time constant 0 or 1")),
    }
}

/// Every operand the instruction reads or writes in registers.
fn scopes(cx: &CallCx, g: &GemmCall, accumulate: bool) -> Result<(), Decline> {
    let c = accumulate.then_some(("C", g.c));
    for (name, r) in [("D", g.d), ("A", g.a), ("B", g.b)].into_iter().chain(c) {
        let b = cx.buf(r.buf);
        if b.scope != MemScope::Local {
            return Err(Decline::new(
                CommonRule::OperandScope,
                format!(
                    "{name} `{}` is in {} memory; mma.sync takes register (local) fragments: load A and B with `Tx.warp.copy` (ldmatrix) first",
                    b.name,
                    b.scope.name()
                ),
            ));
        }
    }
    Ok(())
}

/// The `mma.sync` forms of the operand types, in trial order, that the target has.
fn forms(cx: &CallCx, g: &GemmCall) -> Result<Vec<MmaKind>, Decline> {
    let dt = |r: &tirx_ir::hir::BufferRegion| cx.buf(r.buf).dtype;
    let (a, b, c, d) = (dt(g.a), dt(g.b), dt(g.c), dt(g.d));
    let shapes = [MmaShape::M16N8K16, MmaShape::M16N8K8, MmaShape::M16N8K32];
    let kinds: Vec<MmaKind> = shapes.iter().filter_map(|&s| MmaKind::new(s, a, b, c, d).ok()).collect();
    if kinds.is_empty() {
        return Err(Decline::new(
            CommonRule::Dtype,
            format!(
                "no mma.sync takes A {a}, B {b}, C {c}, D {d}: float16 or bfloat16 A and B (one type) with float32 C and D, float32 (as tf32) with float32, or int8/uint8 with int32"
            ),
        ));
    }
    let arch = cx.opts.arch;
    let supported: Vec<MmaKind> = kinds.iter().copied().filter(|k| arch.supports(k.min_arch())).collect();
    if supported.is_empty() {
        let k = kinds[0];
        return Err(Decline::arch(&format!("mma.sync.{}", k.ptx()), k.min_arch(), arch));
    }
    Ok(supported)
}

/// A is M×K, B is K×N, C and D are M×N (the script checks this too).
fn shapes(d: &MatrixOperand, a: &MatrixOperand, b: &MatrixOperand, c: Option<&MatrixOperand>) -> Result<(), Decline> {
    let c_ok = c.is_none_or(|c| (c.rows, c.cols) == (d.rows, d.cols));
    if a.rows == d.rows && b.cols == d.cols && a.cols == b.rows && c_ok {
        return Ok(());
    }
    Err(Decline::new(
        CommonRule::Operand,
        format!(
            "shapes do not multiply: D {}×{}, A {}×{}, B {}×{} (A is M×K, B K×N, C and D M×N after transposes)",
            d.rows, d.cols, a.rows, a.cols, b.rows, b.cols
        ),
    ))
}

/// The operands as warp 0 holds its part (the same registers in every warp).
struct Locals {
    d: Local,
    a: Local,
    b: Local,
    /// Only when C is read (`beta = 1`).
    c: Option<Local>,
}

fn per_warp(
    d: &MatrixOperand,
    a: &MatrixOperand,
    b: &MatrixOperand,
    c: Option<&MatrixOperand>,
    warps: i64,
) -> Result<Locals, Decline> {
    let split = fragment::split_warps(d, warps)?;
    let all_k = vec![(0..a.cols).collect::<Vec<i64>>(); warps as usize];
    Ok(Locals {
        d: fragment::local(d, &split.rows, &split.cols)?,
        a: fragment::local(a, &split.rows, &all_k)?,
        b: fragment::local(b, &all_k, &split.cols)?,
        c: c.map(|c| fragment::local(c, &split.rows, &split.cols)).transpose()?,
    })
}

/// Every operand's tiles as `kind`'s fragments (C as D's registers when it is not read).
fn fit(kind: MmaKind, l: &Locals, accumulate: bool) -> Result<MmaPlan, String> {
    let Locals { d, a, b, c } = l;
    let k = kind.shape.k();
    if a.cols % k != 0 {
        return Err(format!("K = {} is not a multiple of {k}", a.cols));
    }
    let d = fragment::tile_regs(kind, MmaOperand::Acc, d)?;
    let a = fragment::tile_regs(kind, MmaOperand::A, a)?;
    let b = fragment::tile_regs(kind, MmaOperand::B, b)?;
    let c = match c {
        Some(c) => fragment::tile_regs(kind, MmaOperand::Acc, c)?,
        None => d.clone(),
    };
    let tiles = [d.grid[0], d.grid[1], a.grid[1]];
    Ok(MmaPlan { kind, accumulate, tiles, d, a, b, c })
}

/// D is written while A, B (and C's later tiles) are still read: their registers must not overlap.
fn aliasing(p: &MmaPlan) -> Result<(), Decline> {
    let regs =
        |t: &TileRegs, per: usize| -> Vec<i64> { t.regs.iter().flatten().flat_map(|&r| r..r + per as i64).collect() };
    let dset = regs(&p.d, 1);
    for (t, per) in [(&p.a, p.kind.a.per_reg()), (&p.b, p.kind.b.per_reg())] {
        if t.buf == p.d.buf && regs(t, per).iter().any(|r| dset.contains(r)) {
            return Err(Decline::new(
                CommonRule::Operand,
                format!("D and {} `{}` share registers: D is written while {} is still read", t.role, t.name, t.role),
            ));
        }
    }
    let c_overlaps = p.c.buf == p.d.buf && p.c.regs != p.d.regs && regs(&p.c, 1).iter().any(|r| dset.contains(r));
    if p.accumulate && c_overlaps {
        return Err(Decline::new(
            CommonRule::Operand,
            format!(
                "C and D are both `{}` at registers that hold different elements: D's first tiles would overwrite C before it is read; use C = D or separate registers",
                p.d.name
            ),
        ));
    }
    Ok(())
}

/// `m16n8k16.row.col.f32.f16.f16.f32: 64×32×32 per warp = 4×4×2 tiles, 32 mma.sync per warp, D = A·B + C`.
fn summary(p: &MmaPlan, warps: i64) -> String {
    let [mt, nt, kt] = p.tiles;
    let k = p.kind.shape.k();
    let per = if warps > 1 { format!(" in each of {warps} warps") } else { String::new() };
    let what = if p.accumulate { "D = A·B + C" } else { "D = A·B" };
    format!(
        "{}: {}×{}×{} per warp = {mt}×{nt}×{kt} tiles, {} mma.sync{per}, {what}",
        p.kind.ptx(),
        16 * mt,
        8 * nt,
        k * kt,
        mt * nt * kt
    )
}

/// Per operand: tile grid and the registers of its tiles; `spread`: the operands distributed over warps.
fn notes(p: &MmaPlan, spread: &[&str], warps: i64, c_name: &str) -> Vec<String> {
    let [mt, nt, kt] = p.tiles;
    let k = p.kind.shape.k();
    let mut out = vec![format!(
        "mma.sync.aligned.{} (sm_{}{}+): M {mt} × N {nt} × K {kt} tiles of 16×8×{k} per warp",
        p.kind.ptx(),
        p.kind.min_arch().major,
        p.kind.min_arch().minor
    )];
    if warps > 1 {
        out.push(format!(
            "{warps} warps each compute a {}×{} tile of D; distributed over warps: {}; the others are each warp's own",
            16 * mt,
            8 * nt,
            if spread.is_empty() { "none".to_string() } else { spread.join(", ") }
        ));
    }
    let line = |t: &TileRegs, what: &str, names: [&str; 2]| {
        format!(
            "{} `{}`: {}×{} {what} fragments ({}, {}) at {}",
            t.role,
            t.name,
            t.grid[0],
            t.grid[1],
            names[0],
            names[1],
            t.describe(names)
        )
    };
    out.push(line(&p.d, "accumulator", ["mt", "nt"]));
    out.push(line(&p.a, &format!("{} A", p.kind.shape.name()), ["mt", "kt"]));
    out.push(line(&p.b, &format!("{} B", p.kind.shape.name()), ["kt", "nt"]));
    if p.accumulate {
        out.push(line(&p.c, "accumulator", ["mt", "nt"]));
    } else {
        out.push(format!("C `{c_name}`: not read (beta = 0)"));
    }
    out
}
