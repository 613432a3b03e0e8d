//! # tirx-lower
//!
//! Lowers a HIR [`Kernel`](tirx_ir::hir::Kernel) to the per-thread LIR
//! ([`LKernel`]): what every thread of every CTA executes.
//!
//! * [`scope`]: scope-id declarations (closure → grid/block), the set of active
//!   threads (narrowed by `if` on scope ids), and per call the threads that
//!   cooperate (`intra`) and the thread-id expression of the call's scope.
//! * [`dispatch`]: the registry of lowering variants per tile op, trial order,
//!   forced variants (`dispatch="name"`), decline tables and fallback warnings.
//! * [`copy`]: the copy variants (`gmem_smem`, `gmem_smem_predicated`,
//!   `ldstmatrix`, `reg`, `fallback`), one module each; [`elementwise`]: the
//!   elementwise variants; [`gemm`]: `mma.sync` (`mma.m16n8k*`).
//! * [`operand`]: the one operand model — a region of a global/shared buffer
//!   or of registers, resolved once per call for every variant.
//! * [`explain`]: per tile call, every variant tried and why (`tirx explain`).
//! * `bounds`: every region and scalar access against its buffer's shape over
//!   the ranges of its variables, before dispatch: provably outside is a user
//!   error, unproven a warning and a simulator check (`BoundsCheck`).
//! * `stmt`, `expr`, `addr`, `build`: HIR statements/expressions → LIR, buffer
//!   addressing through layouts, constant folding and name keeping; `smem`: the
//!   shared-memory budget of the allocations against the target.
//!
//! Nothing here keeps ambient state: every decision reads the explicit
//! [`scope::ScopeView`] of its call.

mod addr;
mod affine;
mod asynch;
mod bounds;
mod build;
mod collective;
mod cond;
pub mod copy;
pub mod copy_async;
pub mod elementwise;
mod env;
pub mod explain;
mod expr;
pub mod gemm;
mod launch;
mod lay;
pub mod operand;
mod options;
pub mod ptx;
pub mod reduce;
mod registry;
pub mod scope;
mod select;
mod smem;
mod stmt;
mod symbols;
mod text;
pub mod variant;

pub use copy::CopyRule;
pub use copy_async::CopyAsyncRule;
pub use elementwise::EwiseRule;
pub use explain::{CallExplain, OperandExplain, SpanInfo, Tried};
pub use gemm::GemmRule;
pub use options::LowerOptions;
pub use reduce::ReduceRule;
pub use variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Registry, Rule, RuleKind, Variant};

use tirx_ir::hir::Kernel;
use tirx_ir::lir::LKernel;
use tirx_ir::Diagnostic;

/// A lowered kernel, the dispatch record of every tile call, warnings and notes.
#[derive(Clone, Debug)]
pub struct Lowered {
    pub lir: LKernel,
    pub explain: Vec<CallExplain>,
    pub warnings: Vec<Diagnostic>,
    /// Decisions lowering made for the kernel as a whole (static shared memory
    /// over 48 KiB placed in dynamic shared memory), as notes.
    pub notes: Vec<Diagnostic>,
}

/// Lowers `k` with the CUDA variant registry. Errors are diagnostics at the
/// construct at fault (every error found, not only the first).
pub fn lower_kernel(k: &Kernel, opts: &LowerOptions) -> Result<Lowered, Vec<Diagnostic>> {
    lower_with(k, opts, &Registry::cuda())
}

/// [`lower_kernel`] with an explicit registry (tests, experiments).
pub fn lower_with(k: &Kernel, opts: &LowerOptions, reg: &Registry) -> Result<Lowered, Vec<Diagnostic>> {
    stmt::lower(k, opts, reg).lowered
}

/// The dispatch record of every tile call, also when lowering fails, with the
/// lowering itself (its warnings, or its errors).
pub fn explain_kernel(k: &Kernel, opts: &LowerOptions) -> (Vec<CallExplain>, Result<Lowered, Vec<Diagnostic>>) {
    let out = stmt::lower(k, opts, &Registry::cuda());
    (out.explain, out.lowered)
}
