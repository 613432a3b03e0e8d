//! # tirx-ir
//!
//! * [`hir`]: kernels as scripts write them — buffers with layouts, scope ids,
//!   structured statements, tile-primitive calls. Produced by `tirx-script`,
//!   consumed by `tirx-lower`.
//! * [`op`]: the tile-op table — every op's family, operands (names, roles,
//!   kinds, defaults) and config keys with their typed values.
//! * [`lir`]: the lowered per-thread program, in instruction families (one
//!   module each, with its checker and printer; `docs/lir.md`). Produced by
//!   `tirx-lower`, consumed by `tirx-cuda` (CUDA C++) and `tirx-sim` (CPU execution).
//! * [`traffic`]: an analysis of the LIR — whether a kernel only moves data, and
//!   the global bytes it reads and writes.
//! * [`scope_ids`]: the scope-id extent closure (§1.2) shared by the script
//!   checks and the launch computation.
//! * [`diag`]: diagnostics with spans, rendered as `file:line:col` + source + caret.
//! * [`vocab`]: the hardware's names both HIR and LIR carry (rounding directions,
//!   shuffle modes), so that neither imports the other for them.
//! * [`dtype`] and [`span`] are the element types and byte spans all of the above use.

pub mod diag;
pub mod dtype;
pub mod hir;
pub mod lir;
pub mod op;
pub mod scope_ids;
pub mod span;
pub mod target;
pub mod traffic;
pub mod vocab;

pub use diag::{Diagnostic, Severity};
pub use dtype::DType;
pub use span::Span;
pub use target::{Arch, Features};
