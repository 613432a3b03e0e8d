//! # tirx-lower
//!
//! Lowers a HIR [`Kernel`] to the per-thread LIR
//! ([`LKernel`](tirx_ir::lir::LKernel)): what every thread of every CTA executes. Its modules, from
//! the bottom up (a module imports only those above it in this list; no
//! import cycle, `ARCHITECTURE.md`):
//!
//! * services, pure over the HIR and the LIR under construction: `options`
//!   ([`LowerOptions`]), `text` (source text of regions and expressions),
//!   `build` (the LIR under construction: names, ranges, folding
//!   constructors), `affine` (affine index forms and their ranges), `symbols`
//!   (what the launch decides: scalar parameters, symbolic grid dims), `scope`
//!   (scope ids → grid/block, active threads, the threads of a call), `cond`
//!   (what a condition says of one variable), `lay` (layout adapters), `env`
//!   (HIR buffers and variables → LIR arrays and values), `addr` (addresses
//!   through layouts), `expr` (HIR expressions → LIR), `launch` (facts and
//!   checks over run-time sizes), `bounds` (every region against its buffer,
//!   before dispatch), `smem` (the shared-memory budget);
//! * the variant API, `variant`: [`Variant`], [`Plan`], typed [`Decline`]s
//!   ([`Rule`], [`CommonRule`]), the call context [`CallCx`] (operands read by
//!   their slot in the tile-op table), the [`Emitter`] and the [`Registry`]
//!   container; with `operand`, the one operand model variants share;
//! * the families, one module per variant, each with its own rules in its
//!   `call.rs`: `copy` ([`CopyRule`]), `copy_async` ([`CopyAsyncRule`]),
//!   `elementwise` ([`EwiseRule`]), `gemm` ([`GemmRule`]), `permute` ([`PermuteRule`]),
//!   `reduce` ([`ReduceRule`]);
//! * above them: `registry` (the CUDA registry, the one module naming every
//!   family), `select` (planning every variant of a call, choosing, emitting),
//!   `explain` (the dispatch record, [`CallExplain`]);
//! * the statement lowerer, `stmt`, with `asynch`, `collective` and `ptx` (the
//!   kernel's own `T.ptx.*` / `T.cuda.*` statements), and this module's entry
//!   points.
//!
//! Nothing here keeps ambient state: every decision reads the explicit
//! [`ScopeView`] and facts of its call.

mod addr;
mod affine;
mod asynch;
mod bounds;
mod build;
mod collective;
mod cond;
mod copy;
mod copy_async;
mod elementwise;
mod env;
mod explain;
mod expr;
mod gemm;
mod launch;
mod lay;
mod operand;
mod options;
mod permute;
mod ptx;
mod reduce;
mod registry;
mod scope;
mod select;
mod smem;
mod stmt;
mod symbols;
mod text;
mod variant;

pub use copy::CopyRule;
pub use copy_async::CopyAsyncRule;
pub use elementwise::EwiseRule;
pub use explain::{CallExplain, Dim, OperandExplain, SpanInfo, Tried};
pub use gemm::GemmRule;
pub use options::LowerOptions;
pub use permute::PermuteRule;
pub use reduce::ReduceRule;
pub use scope::ScopeView;
pub use stmt::Lowered;
pub use variant::{Bug, CallCx, CommonRule, Decline, Emitter, Group, Plan, Registry, Rule, RuleKind, Variant};

use tirx_ir::hir::Kernel;
use tirx_ir::Diagnostic;

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
