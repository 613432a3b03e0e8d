//! Small `__device__ __forceinline__` helpers, each emitted once and only when used: which
//! helpers there are and their names. Their definitions are `helper_text`'s, the helpers of an
//! LIR instruction family written by its module (`matrix`, ...); the families name the helpers
//! they call through [`Helper::name`].

use tirx_ir::lir::wgmma::{WgmmaIn, WgmmaKind};
use tirx_ir::lir::{MmaIn, MmaKind, MmaShape};
use tirx_ir::DType;

/// The C operand type of a floor helper (narrower integers promote to `int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Num {
    Int,
    LongLong,
    Float,
    Double,
}

impl Num {
    pub(crate) fn c(self) -> &'static str {
        match self {
            Num::Int => "int",
            Num::LongLong => "long long",
            Num::Float => "float",
            Num::Double => "double",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Helper {
    /// Python `//` on signed integers.
    FloorDiv { ty: Num },
    /// Python `%` on signed integers and floats.
    FloorMod { ty: Num },
    /// `ldmatrix` (store = false) / `stmatrix`; loads sort first.
    Matrix { store: bool, num: u8, trans: bool },
    /// `mma.sync` of one shape and multiplicand types.
    Mma { shape: tirx_ir::lir::MmaShape, a: tirx_ir::lir::MmaIn, b: tirx_ir::lir::MmaIn },
    /// `cp.async` of `bytes`, with a source size (`fill`) or without, with an L2 prefetch size or without.
    CpAsync { bytes: u32, fill: bool, prefetch: Option<u32> },
    /// An mbarrier operation.
    Mbar(MbarHelper),
    /// A TMA tensor copy of a `rank`-D box: a load (with a multicast mask or not) or a store,
    /// with an L2 cache policy or not.
    Tma { rank: u8, store: bool, multicast: bool, cache: bool, reduce: bool },
    /// A bulk copy of shared memory into a peer CTA of the cluster (`mapa` + `cp.async.bulk`).
    BulkToPeer,
    /// The barrier of a cooperative grid's CTAs that meet on a global word.
    GridGroupSync,
    /// `max`/`min` of floats propagating NaN (`torch.maximum`); `ty` is `Float` or `Double`.
    MinMax { max: bool, ty: Num },
    /// The wgmma shared-memory descriptor builder.
    WgmmaDesc,
    /// The register fence of wgmma operands (`word`: a 32-bit word of packed elements).
    WgmmaFenceOperand { word: bool },
    /// A wgmma register defined anew at a fence: its old value dead (`word`: as above).
    WgmmaFreshOperand { word: bool },
    /// `wgmma.mma_async` of one form.
    Wgmma(WgmmaHelper),
    /// A bf16 pair widened to a float pair by bit placement.
    Bf16x2ToFloat2,
    /// `2^x` with subnormal results flushed to zero (`ex2.approx.ftz.f32`).
    Exp2Ftz,
    /// `2^x` on the FMA pipe (`MathFn::Exp2Fma`).
    Exp2Fma,
}

impl Helper {
    pub fn name(self) -> String {
        match self {
            Helper::FloorDiv { .. } => "tirx_floordiv".into(),
            Helper::FloorMod { .. } => "tirx_floormod".into(),
            Helper::Matrix { store, num, trans } => matrix_name(store, num, trans),
            Helper::Mma { shape, a, b } => mma_name(shape, a, b),
            Helper::CpAsync { bytes, fill, prefetch } => cp_async_name(bytes, fill, prefetch),
            Helper::Mbar(h) => mbar_name(h).into(),
            Helper::Tma { rank, store, multicast, cache, reduce } => tma_name(rank, store, multicast, cache, reduce),
            Helper::BulkToPeer => "tirx_bulk_copy_to_peer".into(),
            Helper::GridGroupSync => "tirx_grid_group_sync".into(),
            Helper::MinMax { max, .. } => if max { "tirx_max" } else { "tirx_min" }.into(),
            Helper::WgmmaDesc => "tirx_wgmma_desc".into(),
            Helper::WgmmaFenceOperand { .. } => "tirx_wgmma_fence_operand".into(),
            Helper::WgmmaFreshOperand { .. } => "tirx_wgmma_fresh_operand".into(),
            Helper::Wgmma(h) => wgmma_name(h),
            Helper::Bf16x2ToFloat2 => "tirx_bf16x2_to_float2".into(),
            Helper::Exp2Ftz => "tirx_exp2_ftz".into(),
            Helper::Exp2Fma => "tirx_exp2_fma".into(),
        }
    }
}

/// The mbarrier helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MbarHelper {
    Init,
    Arrive,
    /// An arrival on the barrier at the same offset in a peer CTA of the cluster.
    ArriveRemote,
    /// The same at CTA scope (no fence: CUTLASS's `ClusterBarrier::arrive`).
    ArriveRemoteCta,
    ArriveExpectTx,
    Wait,
}

/// One `wgmma.mma_async` helper: the form and the operand sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WgmmaHelper {
    pub n: u32,
    pub a: WgmmaIn,
    pub b: WgmmaIn,
    /// A float16 accumulator (two per 32-bit register).
    pub acc_f16: bool,
    /// A from registers (`rs`), else from shared memory (`ss`).
    pub regs_a: bool,
    pub trans_a: bool,
    pub trans_b: bool,
}

impl WgmmaHelper {
    pub(crate) fn kind(self) -> WgmmaKind {
        WgmmaKind { n: self.n, a: self.a, b: self.b, acc: if self.acc_f16 { DType::F16 } else { DType::F32 } }
    }
}

/// The helper's name: `tirx_ldmatrix_x4_trans`.
fn matrix_name(store: bool, num: u8, trans: bool) -> String {
    let instr = if store { "stmatrix" } else { "ldmatrix" };
    format!("tirx_{instr}_x{num}{}", if trans { "_trans" } else { "" })
}

/// `tirx_mma_m16n8k16_f32_bf16_bf16_f32`.
fn mma_name(shape: MmaShape, a: MmaIn, b: MmaIn) -> String {
    mma_kind(shape, a, b).ptx().replace(".row.col", "").replace('.', "_").replace("m16", "tirx_mma_m16")
}

/// The `mma.sync` form of a helper: an i32 accumulator for integer multiplicands, else f32.
pub(crate) fn mma_kind(shape: MmaShape, a: MmaIn, b: MmaIn) -> MmaKind {
    MmaKind { shape, a, b, acc: if a.is_int() { DType::I32 } else { DType::F32 } }
}

/// `tirx_cp_async_16` / `tirx_cp_async_16_fill` / `tirx_cp_async_16_l2_128`.
fn cp_async_name(bytes: u32, fill: bool, prefetch: Option<u32>) -> String {
    let pf = prefetch.map_or(String::new(), |n| format!("_l2_{n}"));
    format!("tirx_cp_async_{bytes}{}{pf}", if fill { "_fill" } else { "" })
}

/// `tirx_tma_load_2d`, `tirx_tma_load_3d_multicast_l2`, `tirx_tma_store_2d`.
fn tma_name(rank: u8, store: bool, multicast: bool, cache: bool, reduce: bool) -> String {
    let dir = match (store, reduce) {
        (true, true) => "reduce_add",
        (true, false) => "store",
        _ => "load",
    };
    let mc = if multicast { "_multicast" } else { "" };
    let l2 = if cache { "_l2" } else { "" };
    format!("tirx_tma_{dir}_{rank}d{mc}{l2}")
}

/// `tirx_mbarrier_init`, `tirx_mbarrier_wait`, ...
fn mbar_name(h: MbarHelper) -> &'static str {
    match h {
        MbarHelper::Init => "tirx_mbarrier_init",
        MbarHelper::Arrive => "tirx_mbarrier_arrive",
        MbarHelper::ArriveRemote => "tirx_mbarrier_arrive_remote",
        MbarHelper::ArriveRemoteCta => "tirx_mbarrier_arrive_remote_cta",
        MbarHelper::ArriveExpectTx => "tirx_mbarrier_arrive_expect_tx",
        MbarHelper::Wait => "tirx_mbarrier_wait",
    }
}

/// `tirx_wgmma_m64n128k16_f32_bf16_bf16_ss_tb`: shape and types, `ss`/`rs`, `_ta`/`_tb` for MN-major operands.
fn wgmma_name(h: WgmmaHelper) -> String {
    let form = if h.regs_a { "rs" } else { "ss" };
    let t = format!("{}{}", if h.trans_a { "_ta" } else { "" }, if h.trans_b { "_tb" } else { "" });
    format!("tirx_wgmma_{}_{form}{t}", h.kind().ptx().replace('.', "_"))
}
