//! # tirx-ir
//!
//! * [`hir`]: kernels as scripts write them — buffers with layouts, scope ids,
//!   structured statements, tile-primitive calls. Produced by `tirx-script`,
//!   consumed by `tirx-lower`.
//! * [`lir`]: the lowered per-thread program. Produced by `tirx-lower`, consumed
//!   by `tirx-cuda` (CUDA C++) and `tirx-sim` (CPU execution).
//! * [`scope_ids`]: the scope-id extent closure (§1.2) shared by the script
//!   checks and the launch computation.
//! * [`diag`]: diagnostics with spans, rendered as `file:line:col` + source + caret.
//! * [`lir_check`] (`LKernel::validate`) and [`lir_print`] (`Display`) go with
//!   [`lir`]; [`dtype`] and [`span`] are the element types and byte spans all
//!   of the above use.

pub mod diag;
pub mod dtype;
pub mod hir;
pub mod lir;
pub mod lir_check;
pub mod lir_print;
pub mod scope_ids;
pub mod span;
pub mod target;

pub use diag::{Diagnostic, Severity};
pub use dtype::DType;
pub use span::Span;
pub use target::Arch;
