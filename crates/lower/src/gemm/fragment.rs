//! Fragment matching for `mma.sync` (`docs/tile-primitives.md` §3.9): each
//! register operand of a gemm is read as a logical matrix whose every element
//! has a *home* — warp, lane, register — computed from its layout; the homes
//! are then checked against the PTX fragments of an instruction, tile by tile.
//!
//! 1. [`MatrixOperand`]: the region sliced through the one operand model
//!    (`operand::register`), transposes applied (A is M×K, B is K×N, C and D
//!    are M×N), the home of every element from the layout's coordinates.
//! 2. [`split_warps`]: which rows and columns of D each warp of the scope owns
//!    (every warp the same number; at warp scope, or for a D that is not
//!    distributed over warps, all of them). Each operand is then viewed per
//!    warp ([`Local`]): warp `w` must hold its rows of A (all of K), its
//!    columns of B and its tile of C, at the same lanes and registers as warp 0
//!    — so one unrolled instruction list, indexed by constant registers, serves
//!    every warp. An operand without warp axes is each warp's own copy.
//! 3. `fit`: for one instruction shape, every 16×8 (D, C), 16×k (A) and k×8
//!    (B) tile of the warp's view must be exactly the fragment
//!    ([`MmaKind::coord`]): element (row, col) of register `r` of lane `l` is at
//!    lane `l`, and the elements packed in one 32-bit register are consecutive
//!    registers starting at a multiple of their count. The result is the
//!    register index of every fragment register of every tile: the outer tile
//!    groups coincide across operands by construction, since tiles are named by
//!    their logical position.
//!
//! The reference reaches the same verdict structurally (grouping each layout
//! into the fragment's iters); reading homes element by element also accepts
//! any register order the layout describes and names the first element that
//! is not where the instruction reads it.

use super::call::GemmRule;
use crate::operand;
use crate::variant::{CallCx, Decline};
use tirx_ir::hir::{BufId, BufferRegion};
use tirx_ir::lir::{MmaKind, MmaOperand};
use tirx_layout::{Axis, ExecScope};

/// Where one element of a register operand lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Home {
    /// The warp of the scope, `None` when the layout has no warp axes (each warp's own copy).
    pub warp: Option<i64>,
    pub lane: i64,
    pub reg: i64,
}

/// A register region as a logical matrix (transposes applied).
#[derive(Clone, Debug)]
pub struct MatrixOperand {
    /// `D`, `A`, `B`, `C`.
    pub role: &'static str,
    pub name: String,
    pub buf: BufId,
    pub rows: i64,
    pub cols: i64,
    /// Row-major homes.
    pub homes: Vec<Home>,
}

impl MatrixOperand {
    fn home(&self, r: i64, c: i64) -> Home {
        self.homes[(r * self.cols + c) as usize]
    }
    fn distributed(&self) -> bool {
        self.homes.iter().any(|h| h.warp.is_some())
    }
}

/// Resolves a gemm register operand; `transposed` swaps its two matrix dims.
pub fn matrix_operand(
    cx: &CallCx,
    r: &BufferRegion,
    role: &'static str,
    transposed: bool,
    warps: i64,
) -> Result<MatrixOperand, Decline> {
    let b = cx.buf(r.buf);
    let frag = |m: String| Decline::new(GemmRule::Fragment, m);
    let tile = operand::register(cx, r).map_err(frag)?.tile;
    if let Some(it) = tile.replica.iter().find(|i| i.axis.is_thread()) {
        return Err(Decline::new(
            GemmRule::Replicated,
            format!(
                "{role} `{}` replicates its elements over threads ({}:{}@{}); mma.sync reads each element from one lane",
                b.name, it.extent, it.stride, it.axis
            ),
        ));
    }
    let ext: Vec<i64> = r.ranges.iter().map(|g| g.extent).collect();
    let dims: Vec<usize> = (0..ext.len()).filter(|&d| ext[d] != 1).collect();
    let [d0, d1] = dims[..] else {
        return Err(frag(format!(
            "{role} `{}` is a region of extents {ext:?}; gemm operands are matrices (two dims above 1)",
            b.name
        )));
    };
    let (rd, cd) = if transposed { (d1, d0) } else { (d0, d1) };
    let (rows, cols) = (ext[rd], ext[cd]);
    let mut homes = Vec::with_capacity((rows * cols) as usize);
    let mut coord = vec![0i64; ext.len()];
    for i in 0..rows {
        for j in 0..cols {
            coord[rd] = i;
            coord[cd] = j;
            let c = tile.apply(&coord, &ext).map_err(|e| frag(format!("`{}`: {e}", b.name)))?;
            homes.push(home(&c, cx.scope.kind, warps).map_err(|m| frag(format!("{role} `{}` {m}", b.name)))?);
        }
    }
    Ok(MatrixOperand { role, name: b.name.clone(), buf: r.buf, rows, cols, homes })
}

/// The home of one element from its layout coordinates at a `kind`-scope call of `warps` warps.
fn home(c: &tirx_layout::Coord, kind: ExecScope, warps: i64) -> Result<Home, String> {
    let mut h = Home { warp: None, lane: 0, reg: 0 };
    for (&axis, &v) in c {
        match (axis, kind) {
            (Axis::M, _) => h.reg = v,
            (Axis::LaneId, _) => h.lane += v,
            (Axis::Tx, ExecScope::Cta) | (Axis::TidInWg, ExecScope::Warpgroup) => {
                h.lane += v % 32;
                h.warp = Some(v / 32);
            }
            (Axis::WarpId, ExecScope::Cta) | (Axis::WidInWg, ExecScope::Warpgroup) => h.warp = Some(v),
            (a, _) if a.is_memory() => return Err(format!("stores elements on the `{a}` axis; registers use `m`")),
            (a, _) => {
                return Err(format!(
                    "is distributed over `{a}`, which a {kind}-scope gemm does not own: call it at the scope its layout describes (warp: laneid; warpgroup: laneid, wid_in_wg; cta: laneid, warpid)"
                ))
            }
        }
    }
    if h.warp.is_some_and(|w| w >= warps) {
        return Err(format!("has elements in warp {} of a {kind} of {warps} warps", h.warp.unwrap_or(0)));
    }
    Ok(h)
}

/// The rows and columns of D each warp computes.
#[derive(Clone, Debug)]
pub struct WarpSplit {
    pub rows: Vec<Vec<i64>>,
    pub cols: Vec<Vec<i64>>,
}

/// Reads the warps' tiles off D: each warp owns a box of rows × columns, all
/// boxes of one size; a D without warp axes is every warp's own (whole) matrix.
pub fn split_warps(d: &MatrixOperand, warps: i64) -> Result<WarpSplit, Decline> {
    let all = |n: i64| (0..n).collect::<Vec<i64>>();
    if !d.distributed() {
        return Ok(WarpSplit { rows: vec![all(d.rows); warps as usize], cols: vec![all(d.cols); warps as usize] });
    }
    let bad = |m: String| Decline::new(GemmRule::Fragment, format!("D `{}` {m}", d.name));
    let mut split = WarpSplit { rows: vec![], cols: vec![] };
    for w in 0..warps {
        let mut rows = vec![];
        let mut cols = vec![];
        let mut count = 0;
        for r in 0..d.rows {
            for c in 0..d.cols {
                if d.home(r, c).warp == Some(w) {
                    count += 1;
                    rows.push(r);
                    cols.push(c);
                }
            }
        }
        rows.sort_unstable();
        rows.dedup();
        cols.sort_unstable();
        cols.dedup();
        if count == 0 {
            return Err(bad(format!("leaves warp {w} without a tile; every warp of the scope computes one")));
        }
        if count != rows.len() * cols.len() {
            return Err(bad(format!(
                "gives warp {w} {count} elements over {} rows and {} columns: a warp's tile must be a box of rows × columns",
                rows.len(),
                cols.len()
            )));
        }
        if let Some(first) = split.rows.first() {
            if (rows.len(), cols.len()) != (first.len(), split.cols[0].len()) {
                return Err(bad(format!(
                    "gives warp {w} a {}×{} tile and warp 0 a {}×{} one; every warp must compute the same shape",
                    rows.len(),
                    cols.len(),
                    first.len(),
                    split.cols[0].len()
                )));
            }
        }
        split.rows.push(rows);
        split.cols.push(cols);
    }
    Ok(split)
}

/// One operand as warp 0 holds it: `cells[i * cols + j] = (lane, register)`.
#[derive(Clone, Debug)]
pub struct Local {
    pub role: &'static str,
    pub name: String,
    pub buf: BufId,
    pub rows: i64,
    pub cols: i64,
    pub cells: Vec<(i64, i64)>,
}

/// The per-warp view of `x` over rows `rows[w]` and columns `cols[w]` of each
/// warp: every element must be in warp `w` (or in an operand without warp
/// axes) and at the lane and register it has in warp 0.
pub fn local(x: &MatrixOperand, rows: &[Vec<i64>], cols: &[Vec<i64>]) -> Result<Local, Decline> {
    let (nr, nc) = (rows[0].len(), cols[0].len());
    let mut cells = Vec::with_capacity(nr * nc);
    for (w, (rw, cw)) in rows.iter().zip(cols).enumerate() {
        for (i, &r) in rw.iter().enumerate() {
            for (j, &c) in cw.iter().enumerate() {
                let h = x.home(r, c);
                if h.warp.is_some_and(|hw| hw != w as i64) {
                    return Err(Decline::new(
                        GemmRule::Fragment,
                        format!(
                            "{} `{}` element ({r}, {c}) is in warp {}, but warp {w} computes with it (its D tile needs it)",
                            x.role,
                            x.name,
                            h.warp.unwrap_or(0)
                        ),
                    ));
                }
                if w == 0 {
                    cells.push((h.lane, h.reg));
                } else if cells[i * nc + j] != (h.lane, h.reg) {
                    let (l0, r0) = cells[i * nc + j];
                    return Err(Decline::new(
                        GemmRule::Fragment,
                        format!(
                            "{} `{}`: warp {w} holds its element ({i}, {j}) of the warp tile in lane {}, register {}, warp 0 in lane {l0}, register {r0}; every warp must use the same registers",
                            x.role, x.name, h.lane, h.reg
                        ),
                    ));
                }
            }
        }
    }
    Ok(Local { role: x.role, name: x.name.clone(), buf: x.buf, rows: nr as i64, cols: nc as i64, cells })
}

/// The registers of one operand, per tile (row-major over the tile grid), each
/// tile's fragment registers in PTX order (the first element of each).
#[derive(Clone, Debug)]
pub struct TileRegs {
    pub role: &'static str,
    pub name: String,
    pub buf: BufId,
    /// Tiles along rows and columns.
    pub grid: [i64; 2],
    pub regs: Vec<Vec<i64>>,
}

impl TileRegs {
    pub fn at(&self, u: i64, v: i64) -> &[i64] {
        &self.regs[(u * self.grid[1] + v) as usize]
    }

    /// `registers {0, 2, 4, 6} + 16·mt + 8·kt` when the tile bases are affine,
    /// else the bases listed.
    pub fn describe(&self, names: [&str; 2]) -> String {
        let t0 = &self.regs[0];
        let base = t0[0];
        let offs: Vec<String> = t0.iter().map(|r| (r - base).to_string()).collect();
        let step = |u: i64, v: i64| self.at(u, v)[0] - base;
        let (su, sv) = (if self.grid[0] > 1 { step(1, 0) } else { 0 }, if self.grid[1] > 1 { step(0, 1) } else { 0 });
        let affine = (0..self.grid[0])
            .all(|u| (0..self.grid[1]).all(|v| self.at(u, v).iter().zip(t0).all(|(r, r0)| r - r0 == su * u + sv * v)));
        let mut s = format!(
            "registers {}{{{}}}",
            if base != 0 { format!("{base} + ") } else { String::new() },
            offs.join(", ")
        );
        if affine {
            for (stride, name, n) in [(su, names[0], self.grid[0]), (sv, names[1], self.grid[1])] {
                if n > 1 {
                    s.push_str(&format!(" + {stride}·{name}"));
                }
            }
        } else {
            let bases: Vec<String> = self.regs.iter().map(|t| t[0].to_string()).collect();
            s.push_str(&format!(" at tile bases [{}] (row-major tiles)", bases.join(", ")));
        }
        s
    }
}

/// The fragments `kind` reads, checked tile by tile over the warp view `x`.
pub fn tile_regs(kind: MmaKind, op: MmaOperand, x: &Local) -> Result<TileRegs, String> {
    let k = kind.shape.k();
    let (th, tw, nregs, per) = match op {
        MmaOperand::A => (16, k, kind.regs()[0], kind.a.per_reg()),
        MmaOperand::B => (k, 8, kind.regs()[1], kind.b.per_reg()),
        MmaOperand::Acc => (16, 8, 4, 1),
    };
    if x.rows % th != 0 || x.cols % tw != 0 {
        return Err(format!(
            "{} `{}` is {}×{} per warp, not a whole number of {th}×{tw} {} tiles",
            x.role,
            x.name,
            x.rows,
            x.cols,
            kind.shape.name()
        ));
    }
    let grid = [x.rows / th, x.cols / tw];
    let mut regs = Vec::with_capacity((grid[0] * grid[1]) as usize);
    for u in 0..grid[0] {
        for v in 0..grid[1] {
            let mut tile = Vec::with_capacity(nregs);
            for r in 0..nregs {
                let mut base = None;
                for lane in 0..32 {
                    for e in 0..per {
                        let (rr, cc) = kind.coord(op, lane, r, e);
                        let (i, j) = (u * th + rr as i64, v * tw + cc as i64);
                        let (hl, hr) = x.cells[(i * x.cols + j) as usize];
                        let want_reg = base.map(|b: i64| b + e as i64);
                        let reg_ok = match want_reg {
                            Some(w) => hr == w,
                            None => hr % per as i64 == 0,
                        };
                        if hl != lane as i64 || !reg_ok {
                            return Err(misplaced(kind, op, x, (i, j), (u, v), (lane, r, e), (hl, hr), want_reg, per));
                        }
                        base = base.or(Some(hr));
                    }
                }
                tile.push(base.unwrap_or(0));
            }
            regs.push(tile);
        }
    }
    Ok(TileRegs { role: x.role, name: x.name.clone(), buf: x.buf, grid, regs })
}

/// Why element `(i, j)` is not where the fragment reads it.
#[allow(clippy::too_many_arguments)]
fn misplaced(
    kind: MmaKind,
    op: MmaOperand,
    x: &Local,
    (i, j): (i64, i64),
    (u, v): (i64, i64),
    (lane, r, e): (usize, usize, usize),
    (hl, hr): (i64, i64),
    want_reg: Option<i64>,
    per: usize,
) -> String {
    let want = match want_reg {
        Some(w) if per > 1 => format!("lane {lane}, register {w} (element {e} of the 32-bit register packing {per})"),
        Some(w) => format!("lane {lane}, register {w}"),
        None if per > 1 => {
            format!("lane {lane}, a register index that is a multiple of {per} (a 32-bit register packs {per})")
        }
        None => format!("lane {lane}"),
    };
    format!(
        "{} `{}` is not the {} {} fragment: its element ({i}, {j}) of the warp tile, register {r} of tile ({u}, {v}), is in lane {hl}, register {hr}; mma.sync reads it from {want}; {}",
        x.role,
        x.name,
        kind.shape.name(),
        operand_name(op),
        hint(kind, op)
    )
}

fn operand_name(op: MmaOperand) -> &'static str {
    match op {
        MmaOperand::A => "A",
        MmaOperand::B => "B",
        MmaOperand::Acc => "accumulator",
    }
}

/// One tile's fragment as a script layout, for decline hints.
pub fn hint(kind: MmaKind, op: MmaOperand) -> String {
    let k = kind.shape.k();
    let per = match op {
        MmaOperand::B => kind.b.per_reg(),
        _ => kind.a.per_reg(),
    };
    let layout = match (op, per) {
        (MmaOperand::Acc, _) => "S[(2, 8, 4, 2):(2, 4@laneid, 1@laneid, 1)]",
        (MmaOperand::A, 2) if k == 16 => "S[(2, 8, 2, 4, 2):(2, 4@laneid, 4, 1@laneid, 1)]",
        (MmaOperand::A, 2) => "S[(2, 8, 4, 2):(2, 4@laneid, 1@laneid, 1)]",
        (MmaOperand::A, 1) => "S[(2, 8, 2, 4):(1, 4@laneid, 2, 1@laneid)]",
        (MmaOperand::A, _) => "S[(2, 8, 2, 4, 4):(4, 4@laneid, 8, 1@laneid, 1)]",
        (MmaOperand::B, 2) if k == 16 => "S[(2, 4, 2, 8):(2, 1@laneid, 1, 4@laneid)]",
        (MmaOperand::B, 2) => "S[(4, 2, 8):(1@laneid, 1, 4@laneid)]",
        (MmaOperand::B, 1) => "S[(2, 4, 8):(1, 1@laneid, 4@laneid)]",
        (MmaOperand::B, _) => "S[(2, 4, 4, 8):(4, 1@laneid, 1, 4@laneid)]",
    };
    let (r, c) = match op {
        MmaOperand::A => (16, k),
        MmaOperand::B => (k, 8),
        MmaOperand::Acc => (16, 8),
    };
    format!(
        "one {r}×{c} tile of the {} fragment is {layout} over the logical matrix (A: M×K, B: K×N; a transposed operand swaps its buffer's dims), more tiles in more registers",
        operand_name(op)
    )
}
