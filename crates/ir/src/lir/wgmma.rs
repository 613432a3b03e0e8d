//! The **matrix** family, part 2: Hopper's warpgroup tensor-core instructions
//! (`docs/lir.md` §2.11). All are `.sync.aligned` warpgroup instructions: the 128
//! threads of a warpgroup (4 consecutive warps from a multiple of 4) execute
//! them together; all need sm_90a.
//!
//! * [`Wgmma`]: `wgmma.mma_async.sync.aligned.m64nNkK.{dtype}.{atype}.{btype}` —
//!   `D = A·B + scale_d·D` on a 64×N tile, *asynchronously*: the instruction is
//!   issued, and its accumulator registers are defined again only after a
//!   `wgmma.wait_group` that covers it. A (64×K) comes from shared memory through a
//!   matrix descriptor ([`SmemDesc`]) or from registers (4 per thread), B (K×N)
//!   from shared memory. The types are the buffers' ([`WgmmaKind`]).
//! * [`WgmmaSync`]: `wgmma.fence` (orders earlier register accesses before the
//!   wgmmas that follow), `wgmma.commit_group` (closes the warpgroup's open group
//!   of wgmmas), `wgmma.wait_group N` (waits until at most `N` groups are pending).
//!
//! A descriptor is not a value here but its parts — buffer, start element,
//! major-ness, swizzle, leading and stride byte offsets — so the checker, the
//! simulator and the CUDA generator read the same fields, and the simulator
//! addresses every element as the hardware does ([`SmemDesc::offset`],
//! [`WgmmaSwizzle::apply`]). Swizzle patterns are computed on byte offsets from a
//! base aligned to the pattern (the CUDA generator aligns every shared buffer a
//! swizzled descriptor names to [`WgmmaSwizzle::period`]).

use super::check::{Check, Checker};
use super::print::Printer;
use super::{LBufId, LExpr, LKernel, LStmt, LStmtKind, Space, SyncOp};
use crate::dtype::DType;
use crate::target::Arch;
use serde::Serialize;

/// Rows of every wgmma tile (`m64`).
pub const WGMMA_M: i64 = 64;
/// Threads of a warpgroup.
pub const WARPGROUP: u32 = 128;

/// The element type of a wgmma multiplicand, as PTX names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum WgmmaIn {
    F16,
    BF16,
    /// `float32` elements read as tf32.
    TF32,
    E4M3,
    E5M2,
}

impl WgmmaIn {
    /// The multiplicand type of a buffer dtype (`float32` → tf32).
    pub fn of(dt: DType) -> Option<WgmmaIn> {
        Some(match dt {
            DType::F16 => WgmmaIn::F16,
            DType::BF16 => WgmmaIn::BF16,
            DType::F32 => WgmmaIn::TF32,
            DType::F8E4M3 => WgmmaIn::E4M3,
            DType::F8E5M2 => WgmmaIn::E5M2,
            _ => return None,
        })
    }

    pub fn ptx(self) -> &'static str {
        match self {
            WgmmaIn::F16 => "f16",
            WgmmaIn::BF16 => "bf16",
            WgmmaIn::TF32 => "tf32",
            WgmmaIn::E4M3 => "e4m3",
            WgmmaIn::E5M2 => "e5m2",
        }
    }

    pub fn bits(self) -> u32 {
        match self {
            WgmmaIn::F16 | WgmmaIn::BF16 => 16,
            WgmmaIn::TF32 => 32,
            WgmmaIn::E4M3 | WgmmaIn::E5M2 => 8,
        }
    }

    /// Elements per 32-bit register of an A fragment.
    pub fn per_reg(self) -> usize {
        (32 / self.bits()) as usize
    }

    /// The instruction's K: 32 bytes of each row (k16 for 16-bit, k8 tf32, k32 fp8).
    pub fn k(self) -> i64 {
        256 / i64::from(self.bits())
    }

    /// Only 16-bit multiplicands may be MN-major (`imm-trans` exists for f16/bf16 only).
    pub fn transposable(self) -> bool {
        self.bits() == 16
    }

    fn is_fp8(self) -> bool {
        matches!(self, WgmmaIn::E4M3 | WgmmaIn::E5M2)
    }
}

/// A supported `wgmma.mma_async` form: N, multiplicand types, accumulator type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct WgmmaKind {
    pub n: u32,
    pub a: WgmmaIn,
    pub b: WgmmaIn,
    /// `float32`, or `float16` (f16 and fp8 inputs only).
    pub acc: DType,
}

impl WgmmaKind {
    /// The form with these buffer types, or why there is none (PTX ISA 9.7.15.5.2).
    pub fn new(n: u32, a: DType, b: DType, d: DType) -> Result<WgmmaKind, String> {
        let sig = || format!("m64n{n} with A {a}, B {b}, D {d}");
        if n == 0 || n > 256 || !n.is_multiple_of(8) {
            return Err(format!("no wgmma {}: N is a multiple of 8 in 8..=256", sig()));
        }
        let (Some(ai), Some(bi)) = (WgmmaIn::of(a), WgmmaIn::of(b)) else {
            return Err(format!(
                "no wgmma {}: multiplicands are float16, bfloat16, float32 (tf32), float8_e4m3fn or float8_e5m2",
                sig()
            ));
        };
        let pair_ok = ai == bi || (ai.is_fp8() && bi.is_fp8());
        let acc_ok = d == DType::F32 || (d == DType::F16 && matches!(ai, WgmmaIn::F16 | WgmmaIn::E4M3 | WgmmaIn::E5M2));
        if !pair_ok || !acc_ok {
            return Err(format!(
                "no wgmma {}: A and B are one type (fp8 may mix e4m3 and e5m2); D is float32, or float16 with f16 or fp8 inputs",
                sig()
            ));
        }
        Ok(WgmmaKind { n, a: ai, b: bi, acc: d })
    }

    pub fn k(self) -> i64 {
        self.a.k()
    }

    /// `m64n128k16.f32.bf16.bf16`.
    pub fn ptx(self) -> String {
        let d = if self.acc == DType::F16 { "f16" } else { "f32" };
        format!("m64n{}k{}.{d}.{}.{}", self.n, self.k(), self.a.ptx(), self.b.ptx())
    }

    /// Accumulator elements per 32-bit register (2 for a float16 D).
    pub fn acc_per_reg(self) -> usize {
        if self.acc == DType::F16 {
            2
        } else {
            1
        }
    }

    /// 32-bit accumulator registers per thread: 64·N / 128 elements, packed.
    pub fn d_regs(self) -> usize {
        self.n as usize / 2 / self.acc_per_reg()
    }

    /// The (row, column) of the 64×N accumulator element that thread `tid`
    /// (0..128 of the warpgroup) holds as element `e` of register `r`: warp
    /// `w = tid / 32` owns rows `16w..16w+16`; with `g = lane / 4`, `t = lane % 4`
    /// and `i = acc_per_reg·r + e` the element index, row `16w + g + 8·(i/2 mod 2)`,
    /// column `8·(i/4) + 2t + i mod 2` (PTX ISA, "wgmma register fragments").
    pub fn coord_d(self, tid: usize, r: usize, e: usize) -> (usize, usize) {
        let (w, g, t) = (tid / 32, tid % 32 / 4, tid % 4);
        let i = self.acc_per_reg() * r + e;
        (16 * w + g + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * t + i % 2)
    }

    /// The (row, column) of the 64×K A element that thread `tid` holds as element
    /// `e` of register `r` (0..4) of the register form: row `16w + g + 8·(r mod 2)`,
    /// column `p·t + e + 4p·(r/2)` with `p` elements per register — the
    /// `mma.m16n8k*` A fragment, one per warp.
    pub fn coord_a(self, tid: usize, r: usize, e: usize) -> (usize, usize) {
        let (w, g, t) = (tid / 32, tid % 32 / 4, tid % 4);
        let p = self.a.per_reg();
        (16 * w + g + 8 * (r % 2), p * t + e + 4 * p * (r / 2))
    }
}

/// Which dimension of a shared operand is contiguous in 16-byte chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Major {
    /// K contiguous (A stored M×K row-major, B stored N×K): `imm-trans = 0`.
    K,
    /// M (of A) or N (of B) contiguous: `imm-trans = 1`, 16-bit types only.
    MN,
}

impl Major {
    pub fn name(self) -> &'static str {
        match self {
            Major::K => "K-major",
            Major::MN => "MN-major",
        }
    }
}

/// The swizzle of a shared operand: 16-byte chunk `c` of a `W`-byte row `r` is
/// stored at chunk `c XOR (r mod W/16)` (bits 4.. of the byte offset XORed with bits 7..).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum WgmmaSwizzle {
    None,
    B32,
    B64,
    B128,
}

impl WgmmaSwizzle {
    /// From the layout model's mode (docs/layout-model.md §2.12): 0..3 = none/32B/64B/128B.
    pub fn from_mode(mode: u32) -> Option<WgmmaSwizzle> {
        Some(match mode {
            0 => WgmmaSwizzle::None,
            1 => WgmmaSwizzle::B32,
            2 => WgmmaSwizzle::B64,
            3 => WgmmaSwizzle::B128,
            _ => return None,
        })
    }

    pub fn mode(self) -> u32 {
        match self {
            WgmmaSwizzle::None => 0,
            WgmmaSwizzle::B32 => 1,
            WgmmaSwizzle::B64 => 2,
            WgmmaSwizzle::B128 => 3,
        }
    }

    /// Bytes of one swizzled row (16 without a swizzle: one core-matrix row).
    pub fn width(self) -> i64 {
        16 << self.mode()
    }

    /// The bytes after which the pattern repeats (8 rows); a buffer a descriptor
    /// with this swizzle names is aligned to it, and so is its start, up to the
    /// chunk bits (a K offset inside the row).
    pub fn period(self) -> i64 {
        match self {
            WgmmaSwizzle::None => 16,
            s => 8 * s.width(),
        }
    }

    /// The descriptor's 2-bit layout code (bits 62–63): 0 none, 1 128B, 2 64B, 3 32B.
    pub fn code(self) -> u64 {
        match self {
            WgmmaSwizzle::None => 0,
            WgmmaSwizzle::B128 => 1,
            WgmmaSwizzle::B64 => 2,
            WgmmaSwizzle::B32 => 3,
        }
    }

    /// `128B`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            WgmmaSwizzle::None => "none",
            WgmmaSwizzle::B32 => "32B",
            WgmmaSwizzle::B64 => "64B",
            WgmmaSwizzle::B128 => "128B",
        }
    }

    /// The stored byte offset of logical byte offset `x` (from a pattern-aligned base).
    pub fn apply(self, x: i64) -> i64 {
        let mask = (1i64 << self.mode()) - 1;
        x ^ (((x >> 7) & mask) << 4)
    }
}

/// The largest leading/stride byte offset a descriptor holds (14 bits of 16-byte units).
pub const DESC_MAX_OFFSET: u32 = (1 << 18) - 16;

/// A shared-memory matrix descriptor, by its parts: the operand's element
/// (mn, k) — mn a row of A (0..64) or a column of B (0..N) — is read at byte
/// `swizzle.apply(start + offset(mn, k))` of the buffer, `start = index · elem bytes`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmemDesc {
    pub buf: LBufId,
    /// The start element (the tile's element (0, 0) before the swizzle).
    pub index: LExpr,
    pub major: Major,
    pub swizzle: WgmmaSwizzle,
    /// Leading-dimension byte offset (a multiple of 16).
    pub lbo: u32,
    /// Stride-dimension byte offset (a multiple of 16).
    pub sbo: u32,
}

impl SmemDesc {
    /// The byte offset of element (mn, k) from the start, before the swizzle, for
    /// `esize`-byte elements — the canonical layouts of the PTX ISA ("Shared
    /// memory matrix layout"), in 16-byte chunks of `T = 16 / esize` elements
    /// and rows of `W` = [`WgmmaSwizzle::width`] bytes:
    ///
    /// | major | swizzle | mn | k |
    /// |---|---|---|---|
    /// | K | none | `(mn % 8)·16 + (mn / 8)·SBO` | `(k % T)·e + (k / T)·LBO` |
    /// | K | W | `(mn % 8)·W + (mn / 8)·SBO` | `k·e` (inside the row) |
    /// | MN | none | `(mn % T)·e + (mn / T)·SBO` | `(k % 8)·16 + (k / 8)·LBO` |
    /// | MN | W | `(mn % (W/e))·e + (mn / (W/e))·LBO` | `(k % 8)·W + (k / 8)·SBO` |
    pub fn offset(&self, esize: i64, mn: i64, k: i64) -> i64 {
        let (lbo, sbo, w) = (i64::from(self.lbo), i64::from(self.sbo), self.swizzle.width());
        let t = 16 / esize;
        match (self.major, self.swizzle) {
            (Major::K, WgmmaSwizzle::None) => (mn % 8) * 16 + (mn / 8) * sbo + (k % t) * esize + (k / t) * lbo,
            (Major::K, _) => (mn % 8) * w + (mn / 8) * sbo + k * esize,
            (Major::MN, WgmmaSwizzle::None) => (mn % t) * esize + (mn / t) * sbo + (k % 8) * 16 + (k / 8) * lbo,
            (Major::MN, _) => {
                let row = w / esize;
                (mn % row) * esize + (mn / row) * lbo + (k % 8) * w + (k / 8) * sbo
            }
        }
    }

    /// The 64-bit descriptor without its start address (bits 16.. : LBO, SBO, swizzle).
    pub fn fields(&self) -> u64 {
        (u64::from(self.lbo >> 4) << 16) | (u64::from(self.sbo >> 4) << 32) | (self.swizzle.code() << 62)
    }
}

/// Where A comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum WgmmaA {
    /// Shared memory, through a descriptor (the `ss` form).
    Smem(SmemDesc),
    /// Four 32-bit registers per thread (the `rs` form; K-major by definition): the
    /// first element of each, constant indices into a local buffer.
    Regs { buf: LBufId, index: Vec<LExpr> },
}

/// `wgmma.mma_async.sync.aligned.m64n{n}k{k}.{d}.{a}.{b} {d}, {a}, {b-desc}, scale_d, 1, 1[, trans-a], trans-b`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Wgmma {
    pub n: u32,
    /// The accumulator: the first element of each 32-bit register, constants, in PTX order.
    pub d: LBufId,
    pub d_index: Vec<LExpr>,
    pub a: WgmmaA,
    pub b: SmemDesc,
    /// `bool`: false computes `D = A·B`, true `D = A·B + D`.
    pub scale_d: LExpr,
}

impl Wgmma {
    /// The buffer A is read from.
    pub fn a_buf(&self) -> LBufId {
        match &self.a {
            WgmmaA::Smem(s) => s.buf,
            WgmmaA::Regs { buf, .. } => *buf,
        }
    }

    /// The form the operand buffers' types select.
    pub fn kind(&self, dtype: &dyn Fn(LBufId) -> DType) -> Result<WgmmaKind, String> {
        WgmmaKind::new(self.n, dtype(self.a_buf()), dtype(self.b.buf), dtype(self.d))
    }

    /// Whether A is MN-major (the `imm-trans-a` bit).
    pub fn trans_a(&self) -> bool {
        matches!(&self.a, WgmmaA::Smem(s) if s.major == Major::MN)
    }

    /// Whether B is MN-major (the `imm-trans-b` bit).
    pub fn trans_b(&self) -> bool {
        self.b.major == Major::MN
    }

    pub fn operands(&self) -> Vec<&LExpr> {
        let mut v: Vec<&LExpr> = self.d_index.iter().collect();
        match &self.a {
            WgmmaA::Smem(s) => v.push(&s.index),
            WgmmaA::Regs { index, .. } => v.extend(index),
        }
        v.push(&self.b.index);
        v.push(&self.scale_d);
        v
    }
}

/// The ordering instructions of wgmma.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum WgmmaSync {
    /// `wgmma.fence.sync.aligned`.
    Fence,
    /// `wgmma.commit_group.sync.aligned`.
    Commit,
    /// `wgmma.wait_group.sync.aligned N`.
    Wait(u32),
}

impl WgmmaSync {
    pub fn name(self) -> &'static str {
        match self {
            WgmmaSync::Fence => "wgmma.fence",
            WgmmaSync::Commit => "wgmma.commit_group",
            WgmmaSync::Wait(_) => "wgmma.wait_group",
        }
    }
}

/// `setmaxnreg.{inc,dec}.sync.aligned.u32 N`: the bounds of `N`.
pub const SETMAXNREG_MIN: u32 = 24;
pub const SETMAXNREG_MAX: u32 = 256;

/// Whether `regs` is a valid `setmaxnreg` count: 24..=256, a multiple of 8.
pub fn setmaxnreg_ok(regs: u32) -> bool {
    (SETMAXNREG_MIN..=SETMAXNREG_MAX).contains(&regs) && regs.is_multiple_of(8)
}

/// Every instruction of this part of the family needs sm_90a.
pub const WGMMA_ARCH: Arch = Arch::SM_90A;

impl LKernel {
    /// The local buffers some wgmma uses as its accumulator or A registers (the
    /// registers `wgmma.fence` and `wait_group` order).
    pub fn wgmma_register_bufs(&self) -> Vec<LBufId> {
        let mut out = vec![];
        walk_wgmmas(&self.body, &mut |w| {
            for b in [Some(w.d), matches!(w.a, WgmmaA::Regs { .. }).then(|| w.a_buf())].into_iter().flatten() {
                if !out.contains(&b) {
                    out.push(b);
                }
            }
        });
        out
    }

    /// For each shared buffer a swizzled descriptor names, the alignment its
    /// pattern needs (the largest [`WgmmaSwizzle::period`] among them).
    pub fn wgmma_smem_align(&self) -> Vec<(LBufId, u64)> {
        let mut out: Vec<(LBufId, u64)> = vec![];
        walk_wgmmas(&self.body, &mut |w| {
            let a = match &w.a {
                WgmmaA::Smem(s) => Some(s),
                WgmmaA::Regs { .. } => None,
            };
            for s in a.into_iter().chain([&w.b]) {
                let p = s.swizzle.period() as u64;
                match out.iter_mut().find(|(b, _)| *b == s.buf) {
                    Some((_, al)) => *al = (*al).max(p),
                    None => out.push((s.buf, p)),
                }
            }
        });
        out
    }
}

impl LKernel {
    /// Whether any statement is a `setmaxnreg` (ptxas then needs the register count
    /// at entry fixed: the CUDA says one CTA per SM, `__launch_bounds__(threads, 1)`).
    pub fn uses_setmaxnreg(&self) -> bool {
        fn any(body: &[LStmt]) -> bool {
            body.iter().any(|s| {
                matches!(s.kind, LStmtKind::Sync(SyncOp::SetMaxNReg { .. })) || s.kind.bodies().into_iter().any(any)
            })
        }
        any(&self.body)
    }
}

fn walk_wgmmas(body: &[LStmt], f: &mut dyn FnMut(&Wgmma)) {
    for s in body {
        if let LStmtKind::Matrix(super::MatrixOp::Wgmma(w)) = &s.kind {
            f(w);
        }
        for b in s.kind.bodies() {
            walk_wgmmas(b, f);
        }
    }
}

impl Checker<'_> {
    /// Buffers of the right spaces and a supported form; D and A registers
    /// constant, aligned, inside their buffers, D's distinct and apart from A's;
    /// descriptors well-formed; `scale_d` a bool.
    pub(super) fn wgmma(&mut self, w: &Wgmma) -> Check {
        let dt = |b: LBufId| self.k.bufs.get(b.0 as usize).map_or(DType::Bool, |x| x.dtype);
        let kind = w.kind(&dt)?;
        let d = self.buf(w.d)?;
        if d.space != Space::Local {
            return Err(format!("wgmma accumulator `{}` is not a local (register) buffer", d.name));
        }
        let d_regs = self.wgmma_regs("D", w.d, &w.d_index, kind.d_regs(), kind.acc_per_reg())?;
        match &w.a {
            WgmmaA::Smem(s) => self.smem_desc("A", s, kind.a)?,
            WgmmaA::Regs { buf, index } => {
                if self.buf(*buf)?.space != Space::Local {
                    return Err(format!("wgmma A registers `{}` are not a local buffer", self.buf(*buf)?.name));
                }
                let per = kind.a.per_reg();
                let a_regs = self.wgmma_regs("A", *buf, index, 4, per)?;
                let dper = kind.acc_per_reg() as i64;
                let overlap = |r: i64| d_regs.iter().any(|&x| x < r + per as i64 && r < x + dper);
                if *buf == w.d && a_regs.iter().any(|&r| overlap(r)) {
                    return Err("wgmma D shares registers with A".into());
                }
            }
        }
        self.smem_desc("B", &w.b, kind.b)?;
        self.expect(&w.scale_d, DType::Bool, "wgmma scale_d")
    }

    /// `n` constant register indices into local buffer `b`, each the first of
    /// `per` elements at a multiple of `per`, distinct; returns them.
    fn wgmma_regs(&mut self, what: &str, b: LBufId, idx: &[LExpr], n: usize, per: usize) -> Result<Vec<i64>, String> {
        let buf = self.buf(b)?;
        if idx.len() != n {
            return Err(format!("wgmma {what} takes {n} registers, got {}", idx.len()));
        }
        let mut out = Vec::with_capacity(n);
        for e in idx {
            let LExpr::Int(v, t) = e else {
                return Err(format!(
                    "wgmma {what} register `{}[…]` has a run-time index; register indices are constants",
                    buf.name
                ));
            };
            if *t != DType::I32 || *v < 0 || v + per as i64 > buf.elems || v % per as i64 != 0 {
                return Err(format!(
                    "wgmma {what} register {}[{v}]: needs {per} element(s) starting at a multiple of {per} inside its {} elements",
                    buf.name, buf.elems
                ));
            }
            out.push(*v);
        }
        let mut sorted = out.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|p| p[0] == p[1]) {
            return Err(format!("wgmma {what} names one register twice"));
        }
        Ok(out)
    }

    fn smem_desc(&mut self, what: &str, s: &SmemDesc, ty: WgmmaIn) -> Check {
        let buf = self.buf(s.buf)?;
        if buf.space != Space::Shared {
            return Err(format!("wgmma {what} descriptor names `{}`, which is not in shared memory", buf.name));
        }
        self.index(s.buf, &s.index)?;
        let esize = i64::from(buf.dtype.bytes());
        if let LExpr::Int(v, _) = s.index {
            let byte = v.checked_mul(esize).filter(|b| b % 16 == 0 && v >= 0 && v < buf.elems);
            if byte.is_none() {
                return Err(format!(
                    "wgmma {what} descriptor starts at `{}[{v}]`: not a 16-byte aligned element inside the buffer",
                    buf.name
                ));
            }
        }
        if s.major == Major::MN && !ty.transposable() {
            return Err(format!(
                "wgmma {what} is MN-major, which only 16-bit multiplicands may be ({} is K-major only)",
                ty.ptx()
            ));
        }
        for (name, v) in [("leading", s.lbo), ("stride", s.sbo)] {
            if !v.is_multiple_of(16) || v > DESC_MAX_OFFSET {
                return Err(format!(
                    "wgmma {what} descriptor {name} byte offset {v}: a multiple of 16 up to {DESC_MAX_OFFSET}"
                ));
            }
        }
        Ok(())
    }

    /// `setmaxnreg`: 24..=256 registers in steps of 8, in a CTA of whole warpgroups.
    pub(super) fn setmaxnreg(&self, regs: u32) -> Check {
        if !setmaxnreg_ok(regs) {
            return Err(format!(
                "setmaxnreg {regs}: the count is a multiple of 8 in {SETMAXNREG_MIN}..={SETMAXNREG_MAX}"
            ));
        }
        let cta = self.k.threads_per_cta();
        if !cta.is_multiple_of(WARPGROUP) {
            return Err(format!("setmaxnreg in a CTA of {cta} threads; it needs whole warpgroups of 128"));
        }
        Ok(())
    }
}

impl Printer<'_> {
    /// `wgmma.m64n128k16.f32.bf16.bf16 acc[0:64] = desc(A_s[0]; K-major, 128B, lbo 16, sbo 1024) * desc(..) + scale_d·acc`.
    pub(super) fn wgmma(&self, w: &Wgmma) -> String {
        let dt = |b: LBufId| self.k.bufs.get(b.0 as usize).map_or(DType::Bool, |x| x.dtype);
        let (name, per) = match w.kind(&dt) {
            Ok(k) => (k.ptx(), (k.acc_per_reg(), k.a.per_reg())),
            Err(_) => (format!("m64n{}", w.n), (1, 1)),
        };
        let a = match &w.a {
            WgmmaA::Smem(s) => self.desc(s),
            WgmmaA::Regs { buf, index } => self.reg_list(*buf, index, per.1),
        };
        let d = self.reg_list(w.d, &w.d_index, per.0);
        let acc = match &w.scale_d {
            LExpr::Bool(false) => String::new(),
            LExpr::Bool(true) => " + D".to_string(),
            e => format!(" + ({}) ? D : 0", self.e(e)),
        };
        format!("wgmma.{name} D = {d} <- {a} * {}{acc}", self.desc(&w.b))
    }

    /// `desc(A_s[i]; K-major, 128B, lbo 16, sbo 1024)`.
    fn desc(&self, s: &SmemDesc) -> String {
        format!(
            "desc({}; {}, {}, lbo {}, sbo {})",
            self.at(s.buf, &s.index),
            s.major.name(),
            s.swizzle.name(),
            s.lbo,
            s.sbo
        )
    }

    /// `acc[0:64]` for a run of consecutive registers, else `{acc[0], acc[4], ..}`.
    fn reg_list(&self, b: LBufId, idx: &[LExpr], per: usize) -> String {
        let consts: Option<Vec<i64>> =
            idx.iter().map(|e| if let LExpr::Int(v, _) = e { Some(*v) } else { None }).collect();
        if let Some(c) = consts.filter(|c| !c.is_empty()) {
            if c.windows(2).all(|p| p[1] == p[0] + per as i64) {
                let name = self.buf_name(b);
                return format!("{name}[{}:{}]", c[0], c[0] + (per * c.len()) as i64);
            }
        }
        let r: Vec<String> = idx.iter().map(|i| self.at(b, i)).collect();
        format!("{{{}}}", r.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lir::{LBuf, LKernel, LStmt, MatrixOp};

    #[test]
    fn forms_shapes_and_fragments() {
        let k = WgmmaKind::new(128, DType::BF16, DType::BF16, DType::F32).unwrap();
        assert_eq!((k.ptx().as_str(), k.d_regs(), k.k()), ("m64n128k16.f32.bf16.bf16", 64, 16));
        let k = WgmmaKind::new(256, DType::F8E4M3, DType::F8E5M2, DType::F16).unwrap();
        assert_eq!((k.ptx().as_str(), k.d_regs(), k.k()), ("m64n256k32.f16.e4m3.e5m2", 64, 32));
        let k = WgmmaKind::new(8, DType::F32, DType::F32, DType::F32).unwrap();
        assert_eq!((k.ptx().as_str(), k.k()), ("m64n8k8.f32.tf32.tf32", 8));
        for (n, a, b, d) in [
            (12, DType::F16, DType::F16, DType::F32),
            (264, DType::F16, DType::F16, DType::F32),
            (64, DType::BF16, DType::BF16, DType::F16),
            (64, DType::F32, DType::F32, DType::F16),
            (64, DType::F16, DType::BF16, DType::F32),
            (64, DType::I8, DType::I8, DType::I32),
        ] {
            assert!(WgmmaKind::new(n, a, b, d).is_err(), "{n} {a} {b} {d}");
        }
        // Thread 37 = warp 1, lane 5 (g 1, t 1): register 5 of an f32 D is element 5 = (16 + 1, 8·1 + 2 + 1).
        let k = WgmmaKind::new(64, DType::F16, DType::F16, DType::F32).unwrap();
        assert_eq!(k.coord_d(37, 5, 0), (17, 11));
        assert_eq!(k.coord_d(37, 2, 0), (25, 2));
        // f16 D packs two: register 2, element 1 is element index 5.
        let h = WgmmaKind::new(64, DType::F16, DType::F16, DType::F16).unwrap();
        assert_eq!(h.coord_d(37, 2, 1), (17, 11));
        assert_eq!(k.coord_a(37, 3, 1), (25, 2 + 1 + 8));
    }

    #[test]
    fn descriptor_offsets_follow_the_canonical_layouts() {
        let d = |major, swizzle, lbo, sbo| SmemDesc { buf: LBufId(0), index: LExpr::i32(0), major, swizzle, lbo, sbo };
        // K-major 128B bf16: rows of 128 bytes, 8-row groups 1024 apart, K contiguous.
        let k128 = d(Major::K, WgmmaSwizzle::B128, 16, 1024);
        assert_eq!(k128.offset(2, 9, 5), 128 + 1024 + 10);
        // K-major none: core matrices of 8 rows × 16 bytes; K chunks LBO apart, row groups SBO apart.
        let kn = d(Major::K, WgmmaSwizzle::None, 128, 256);
        assert_eq!(kn.offset(2, 9, 9), 16 + 256 + 2 + 128);
        // MN-major 128B f16: 64 elements per row, atoms LBO apart, 8-row K groups SBO apart.
        let mn = d(Major::MN, WgmmaSwizzle::B128, 8192, 1024);
        assert_eq!(mn.offset(2, 70, 9), 12 + 8192 + 128 + 1024);
        let mnn = d(Major::MN, WgmmaSwizzle::None, 256, 128);
        assert_eq!(mnn.offset(2, 9, 9), 2 + 128 + 16 + 256);
        assert_eq!(WgmmaSwizzle::B128.apply(128 * 3 + 16), 128 * 3 + 16 * (1 ^ 3));
        assert_eq!(WgmmaSwizzle::B32.apply(128 * 3 + 16), 128 * 3);
        assert_eq!(k128.fields(), (1 << 16) | (64u64 << 32) | (1u64 << 62));
    }

    fn kernel(edit: impl FnOnce(&mut Wgmma, &mut Vec<LBuf>)) -> Result<(), String> {
        let buf = |name: &str, dtype, space, elems| LBuf {
            name: name.into(),
            dtype,
            space,
            elems,
            shape: vec![elems],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        };
        let mut bufs = vec![
            buf("A_s", DType::F16, Space::Shared, 64 * 16),
            buf("B_s", DType::F16, Space::Shared, 16 * 16),
            buf("acc", DType::F32, Space::Local, 8),
        ];
        let desc = |b: u32| SmemDesc {
            buf: LBufId(b),
            index: LExpr::i32(0),
            major: Major::K,
            swizzle: WgmmaSwizzle::B32,
            lbo: 16,
            sbo: 256,
        };
        let mut w = Wgmma {
            n: 16,
            d: LBufId(2),
            d_index: (0..8).map(LExpr::i32).collect(),
            a: WgmmaA::Smem(desc(0)),
            b: desc(1),
            scale_d: LExpr::Bool(true),
        };
        edit(&mut w, &mut bufs);
        let body = vec![
            LStmt::new(LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Fence)), Default::default()),
            LStmt::new(LStmtKind::Matrix(MatrixOp::Wgmma(w)), Default::default()),
        ];
        LKernel { bufs, body, ..LKernel::new("k", [1; 3], [128, 1, 1]) }.validate()
    }

    #[test]
    fn checker_accepts_the_form_and_rejects_misuse() {
        assert_eq!(kernel(|_, _| {}), Ok(()));
        let err = |e: Result<(), String>| e.unwrap_err();
        assert!(err(kernel(|w, _| w.d_index.truncate(7))).contains("D takes 8 registers"));
        assert!(err(kernel(|w, _| w.d_index[3] = LExpr::i32(0))).contains("one register twice"));
        assert!(err(kernel(|w, _| w.n = 12)).contains("multiple of 8"));
        assert!(err(kernel(|w, _| w.b.index = LExpr::i32(4))).contains("16-byte aligned"));
        assert!(err(kernel(|w, _| w.b.sbo = 100)).contains("multiple of 16"));
        assert!(err(kernel(|w, _| w.scale_d = LExpr::i32(1))).contains("scale_d"));
        assert!(err(kernel(|_, b| b[1].space = Space::Local)).contains("not in shared memory"));
        let tf32 = |b: &mut Vec<LBuf>| {
            b[0].dtype = DType::F32;
            b[1].dtype = DType::F32
        };
        assert_eq!(kernel(|_, b| tf32(b)), Ok(()));
        assert!(err(kernel(|w, b| {
            tf32(b);
            w.b.major = Major::MN
        }))
        .contains("K-major only"));
    }
}
