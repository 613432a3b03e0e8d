//! # tirx-sim: the CPU simulator of the lowered per-thread IR
//!
//! [`simulate`] executes exactly the [`LKernel`] the CUDA generator prints —
//! every CTA of the grid, every thread of a CTA — with CUDA's scalar semantics
//! (f32 math in f32, f16/bf16 rounded on every store and cast, integer wrap),
//! real barrier phases, and the PTX fragment semantics of ldmatrix/stmatrix.
//! Along the way it checks what a GPU would not tell you: out-of-bounds
//! accesses (every access against its flat array; the regions lowering could
//! not prove in bounds, through their `BoundsCheck`, dim by dim against the
//! logical shape), misaligned accesses, data races between threads and between CTAs, barriers
//! not reached by every thread, warp-collectives run by partial warps, mbarrier
//! deadlocks, cp.async results used before they land, and
//! reads of uninitialised shared/local memory (warnings). With
//! [`SimOptions::stats`] it also measures shared-memory bank conflicts per
//! instruction.
//!
//! Semantics worth knowing:
//! * threads of a CTA run one after another between synchronisation points;
//!   every conflicting unordered access pair is reported as a race, so the
//!   result of a race-free kernel is the GPU's;
//! * `__syncthreads()` must be reached by every thread of the CTA at the same
//!   statement, `__syncwarp()` by every lane of the warp at the same statement;
//! * ldmatrix/stmatrix need all 32 lanes at the same statement, a shuffle every
//!   lane of its member mask (PTX `shfl.sync` source lanes); they move data but
//!   do not order memory (a write by another lane needs a barrier first);
//! * `cp.async` reads its source when issued and writes its destination when
//!   `cp.async.wait_group` completes its group; touching the destination in
//!   between is a race, exiting with copies not waited for an error;
//! * mbarriers have real phases: a wait blocks the thread until the phase of its
//!   parity completes, arrivals release and completed waits acquire (so a
//!   producer/consumer pipeline is race-free), and a wait that can never
//!   complete is a deadlock error naming who waits where;
//! * each CTA starts with zeroed shared and local memory; reading it before a
//!   write is a warning, since a GPU would return garbage;
//! * `a * b + c` rounds twice, as the LIR says; nvcc contracts it into an FMA
//!   unless compiled with `--fmad=false` (see `arith`); the LIR's rounded
//!   arithmetic (`fma`, directed roundings) is one rounding of the exact result
//!   (`round`, `docs/numerics.md` §5);
//! * the kernel is checked with [`LKernel::validate`] first; a malformed one is
//!   an [`SimErrorKind::InvalidKernel`] error, never a panic;
//! * memory is budgeted before it is allocated ([`memory_use`]: the contents
//!   of every buffer; the 16-byte race shadow per global/shared element is
//!   mapped zeroed and costs only the pages a run touches), capped by
//!   [`SimOptions::memory_limit`] (the host's physical memory by default), and
//!   every allocation is fallible: a kernel too large to simulate is a
//!   `ResourceLimit` error, never an abort.
//!
//! Modules: [`value`] (element conversions, parameter buffers), `compile`
//! (LIR → register bytecode: the scalar core and structured control flow; each
//! family's statements through its `Compile`, dispatched from
//! `tirx_ir::for_each_family!`), `exec` (the scheduler, the scalar core's
//! execution, hang diagnosis), `family` (what a family plugs in: `FamilyIns` for
//! its bytecode instructions, `FamilyState` for per-CTA state and the scheduler
//! hooks that use it), `memory` (bounds, alignment, race shadow), `bank`
//! (bank-conflict statistics), `arith` (scalar semantics), `round` (exact
//! rounded arithmetic), `dot` (exact dot products), `error` (errors and
//! warnings).
//!
//! Each LIR instruction family compiles and executes in its own module (some
//! with a second one for a large part): `memop` (memory: stores, vector copies
//! and PTX vector accesses, compiled to the scalar core's), `pair`, `sync`
//! (`__syncthreads`, `__syncwarp`; `barrier`: named barriers), `matrix`
//! (`wgmma`: Hopper's warpgroup instructions and `setmaxnreg`), `collective`,
//! `asynch` (`tma`: TMA copies and bulk groups; `cluster`: clusters, cluster
//! barriers, peer copies), `bounds`. A new family is one module and its `mod`
//! line here: `impl Compile` for its LIR type, `impl FamilyIns` for each
//! bytecode instruction of its own. Per-CTA state adds a field of `FamilyState`
//! and a call in the hooks it needs (`family`); state every memory access must
//! consult, a hook in `memory::touch` (`docs/lir.md` §4).

mod arith;
mod asynch;
mod bank;
mod barrier;
mod bounds;
mod cluster;
mod collective;
mod compile;
mod debug;
mod dot;
mod error;
mod exec;
mod family;
mod fence;
mod grid_group;
mod griddep;
mod matrix;
mod memop;
mod memory;
mod pair;
mod round;
mod sync;
mod tma;
pub mod value;
mod wgmma;

pub use error::{SimError, SimErrorKind, SimWarning};
pub use memory::{
    bytes_text, check_memory, host_memory_limit, memory_use, try_zeroed_bytes, BufUse, MemoryUse, DEFAULT_MEMORY_LIMIT,
    SHADOW_BYTES,
};
use serde::Serialize;
use tirx_ir::lir::{LBufId, LKernel, LaunchError, ScalarValue};
use tirx_ir::Span;

/// How to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Run only the first N CTAs (launch order, x fastest); `None` runs the whole grid.
    pub grid_limit: Option<u64>,
    /// Track shared and global accesses for data races (default true).
    pub check_races: bool,
    /// Collect shared-memory bank-conflict statistics.
    pub stats: bool,
    /// Most bytes of host memory the simulation may take, parameters and race
    /// shadow included ([`memory_use`]); above it `simulate` refuses with a
    /// [`SimErrorKind::ResourceLimit`] error before allocating anything.
    pub memory_limit: u64,
    /// The order the simulator runs the warps of a CTA in, each time it goes round them:
    /// `None` ascending; `Some(seed)` a pseudo-random order drawn afresh each round. A
    /// verdict (races, hangs, values) must not depend on it (the race checker's property test).
    pub warp_order_seed: Option<u64>,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            grid_limit: None,
            check_races: true,
            stats: false,
            memory_limit: host_memory_limit(),
            warp_order_seed: None,
        }
    }
}

/// Bank-conflict statistics of one shared-memory instruction (per statement span, buffer and kind).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BankStat {
    pub span: Span,
    pub buf: String,
    /// `"load"`, `"store"`, `"ldmatrix"` or `"stmatrix"`.
    pub kind: &'static str,
    /// Warp executions measured.
    pub executions: u64,
    /// The most passes one warp execution needed (1 = conflict-free, 32 = fully serialised).
    pub worst_ways: u32,
    pub avg_ways: f64,
}

impl BankStat {
    /// `store to `S`: conflict-free, 1.00 ways on average over 64 warp accesses (simulated)`.
    pub fn describe(&self) -> String {
        let verdict = if self.worst_ways <= 1 {
            "conflict-free".to_string()
        } else {
            format!("{}-way conflicts at worst", self.worst_ways)
        };
        let dir = if self.kind.ends_with("load") || self.kind == "ldmatrix" { "from" } else { "to" };
        format!(
            "{} {dir} `{}`: {verdict}, {:.2} ways on average over {} warp accesses (simulated)",
            self.kind, self.buf, self.avg_ways, self.executions
        )
    }

    /// The access was emitted by the tile call spanning `call` (its statements carry the call's span).
    pub fn within(&self, call: Span) -> bool {
        call.lo <= self.span.lo && self.span.hi <= call.hi
    }

    /// The lines `tirx explain --sim` prints under a call: one `  bank: ...` per access of it.
    pub fn lines(stats: &[&BankStat]) -> String {
        if stats.is_empty() {
            return "  bank: no shared-memory access\n".into();
        }
        stats.iter().map(|s| format!("  bank: {}\n", s.describe())).collect()
    }
}

/// What a successful simulation observed.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SimReport {
    pub warnings: Vec<SimWarning>,
    /// Empty unless [`SimOptions::stats`].
    pub bank: Vec<BankStat>,
    pub ctas_run: u64,
    /// Bytecode instructions executed over all threads (a measure of simulation work).
    pub instructions: u64,
    /// What the kernel printed (`T.cuda.printf`), in thread order: by CTA, then
    /// thread, then program order.
    pub printed: Vec<String>,
}

/// Runs kernel `k` on the CPU.
///
/// `params[i]` holds the bytes of `k.params[i]` (little-endian, `elems * dtype.bytes()` long);
/// they are updated in place — also when an error stops the simulation, in which case they
/// hold what ran until then.
pub fn simulate(k: &LKernel, params: &mut [Vec<u8>], opts: &SimOptions) -> Result<SimReport, SimError> {
    simulate_args(k, params, &[], opts)
}

/// [`simulate`] of a kernel with scalar parameters: `scalars` holds one value per
/// `k.scalars` entry, in order. The launch is bound first ([`launch`]): a missing,
/// extra or mistyped scalar is a `BadArgument` error, a failed launch check or a grid
/// or buffer size out of range an `InvalidLaunch` error, and nothing runs. Buffer
/// sizes are then those of this launch.
pub fn simulate_args(
    k: &LKernel,
    params: &mut [Vec<u8>],
    scalars: &[ScalarValue],
    opts: &SimOptions,
) -> Result<SimReport, SimError> {
    let same: Vec<usize> = (0..params.len()).collect();
    simulate_aliased(k, params, &same, scalars, opts)
}

/// [`simulate_args`] where some parameters are passed the same array, as a call
/// `k(x, x)` does: `same[i]` is the first parameter given parameter `i`'s array
/// (`i` itself when it is the first). Such parameters share one memory, as on the
/// GPU, so an in-place kernel updates it and a thread reading what another writes
/// through the other name is a race. They must have the same dtype and size.
pub fn simulate_aliased(
    k: &LKernel,
    params: &mut [Vec<u8>],
    same: &[usize],
    scalars: &[ScalarValue],
    opts: &SimOptions,
) -> Result<SimReport, SimError> {
    let (mut k, values) = launch(k, scalars)?;
    exec::check_launch(&k, params, opts)?;
    let storage = storage_of(&k, same)?;
    k.validate().map_err(|m| {
        SimError::new(SimErrorKind::InvalidKernel, Span::default(), format!("the lowered kernel is malformed: {m}"))
            .help("this is a bug in the lowering, please report it")
    })?;
    // A tensor map of an aliased parameter describes the shared memory.
    for t in &mut k.tmaps {
        t.buf = LBufId(storage[t.buf.0 as usize]);
    }
    let mut prog = compile::compile(&k, &storage)?;
    // Scalar parameters start in their registers with this launch's values.
    for (s, v) in k.scalars.iter().zip(&values) {
        let t = k.var(s.var).dtype;
        let bits = match *v {
            ScalarValue::Int(i) => value::wrap_int(t, i) as u64,
            ScalarValue::Float(f) => value::round_to(t, f).to_bits(),
        };
        if let Some(r) = prog.template.get_mut((compile::SPECIAL_REGS + s.var.0) as usize) {
            *r = bits;
        }
    }
    exec::run(&k, &prog, params, &storage, opts)
}

/// Buffer index → the buffer whose memory it uses, from `same` (per parameter).
fn storage_of(k: &LKernel, same: &[usize]) -> Result<Vec<u32>, SimError> {
    let mut storage: Vec<u32> = (0..k.bufs.len() as u32).collect();
    let bad = |m: String| SimError::new(SimErrorKind::BadArgument, Span::default(), m);
    if same.len() != k.params.len() {
        return Err(bad(format!("{} aliasing entries for {} parameters", same.len(), k.params.len())));
    }
    for (i, &j) in same.iter().enumerate() {
        if j == i {
            continue;
        }
        if j > i {
            return Err(bad(format!("parameter {i} is said to share the array of the later parameter {j}")));
        }
        let (a, b) = (k.buf(k.params[i]), k.buf(k.params[j]));
        if a.dtype != b.dtype || a.elems != b.elems {
            return Err(bad(format!(
                "`{}` ({} × {}) and `{}` ({} × {}) are passed the same array but differ in dtype or size",
                b.name, b.elems, b.dtype, a.name, a.elems, a.dtype
            )));
        }
        storage[k.params[i].0 as usize] = storage[k.params[j].0 as usize];
    }
    Ok(storage)
}

/// The kernel as the launch with `scalars` runs it (`LKernel::specialize`: sizes and
/// grid evaluated, launch checks passed) and the typed scalar values.
pub fn launch(k: &LKernel, scalars: &[ScalarValue]) -> Result<(LKernel, Vec<ScalarValue>), SimError> {
    let err = |e: LaunchError, kind| {
        let mut s = SimError::new(kind, e.span, e.message);
        s.help = e.help;
        s
    };
    let values = k.bind_scalars(scalars).map_err(|e| err(e, SimErrorKind::BadArgument))?;
    let spec = k.specialize(&values).map_err(|e| err(e, SimErrorKind::InvalidLaunch))?;
    Ok((spec, values))
}
