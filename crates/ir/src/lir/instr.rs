//! [`Instr`]: an LIR instruction family described once.
//!
//! A family is one enum (or struct) of instructions in its own module, and
//! one `impl Instr` there says everything a generic pass needs of it: its
//! name, the oldest target it runs on, the expressions it evaluates, the
//! buffers it reads and writes, whether it computes, the variable it declares,
//! its typing rules and its line of pseudo-code. The checker
//! ([`LKernel::validate`](super::LKernel::validate)), the printer, the traffic
//! count, the arch gate and every walk over statements derive from these
//! methods and match only on the structured statements (`let`, `for`, `if`,
//! comments) themselves.
//!
//! The families are listed once, in [`for_each_family!`](crate::for_each_family):
//! the [`LStmtKind`](super::LStmtKind) enum is generated from the list, and so
//! are the CUDA printer's and the simulator's dispatch, each to its own trait
//! implemented in that crate's module of the family. Adding a family: its
//! module here (the type and `impl Instr`), one line in the list, its module in
//! `tirx-cuda` (`impl Emit`) and in `tirx-sim` (`impl Compile` and its
//! bytecode's execution); the compiler names each missing implementation.

use super::check::{Check, Checker};
use super::print::Printer;
use super::{LBufId, LExpr, LKernel, LVarId};
use crate::dtype::DType;
use crate::target::Arch;

/// Buffers an instruction reads and writes: `(read, written)`.
pub type Accesses = (Vec<LBufId>, Vec<LBufId>);

/// One LIR instruction family: what every generic pass knows of it.
pub trait Instr {
    /// The instruction as messages name it (`shfl.sync.bfly`, `cp.async.cg`).
    fn name(&self) -> String;

    /// The oldest target it exists on; `dtype` gives a buffer's element type.
    fn min_arch(&self, dtype: &dyn Fn(LBufId) -> DType) -> Arch {
        let _ = dtype;
        Arch::MIN
    }

    /// The expressions it evaluates itself.
    fn operands(&self) -> Vec<&LExpr>;

    /// The buffers it reads and writes as operands (loads inside its expressions
    /// not included).
    fn accesses(&self) -> Accesses {
        (vec![], vec![])
    }

    /// The buffers whose memory it moves, as the traffic count sees them: its
    /// accesses, and for an instruction that names memory another way (a TMA
    /// copy through its tensor map) that memory too.
    fn traffic(&self, k: &LKernel) -> Accesses {
        let _ = k;
        self.accesses()
    }

    /// Why it computes — writes values it did not read unchanged — in words;
    /// `None` when it only moves data (the traffic count's "data-only").
    fn computes(&self, k: &LKernel) -> Option<String> {
        let _ = k;
        None
    }

    /// The variable it declares, like `let` (in scope for the rest of its block).
    fn defines(&self) -> Option<LVarId> {
        None
    }

    /// Its typing and operand rules ([`LKernel::validate`](super::LKernel::validate)).
    fn check(&self, c: &mut Checker) -> Check;

    /// Its line of pseudo-code (`tirx lower --emit tir`).
    fn print(&self, p: &Printer) -> String;
}

/// The instruction families, listed once: `$m! { Variant(Type), ... }` for a
/// macro `$m` of the caller's. The LIR statement enum is generated from it, and
/// so is each crate's dispatch to its own per-family trait (the CUDA text, the
/// simulator), so a family missing from one of them is a compile error there.
#[macro_export]
macro_rules! for_each_family {
    ($m:ident) => {
        $m! {
            /// The memory family: stores, vector copies, PTX vector loads and stores ([`memory`](crate::lir::memory)).
            Memory($crate::lir::MemOp),
            /// The pair family: packed 16-bit arithmetic and pair conversions ([`pair`](crate::lir::pair)).
            Pair($crate::lir::PairOp),
            /// The synchronisation family: CTA, warp and named barriers, `setmaxnreg` ([`sync`](crate::lir::sync)).
            Sync($crate::lir::SyncOp),
            /// The matrix family: `ldmatrix` / `stmatrix`, `mma.sync`, `wgmma` ([`matrix`](crate::lir::matrix)).
            Matrix($crate::lir::MatrixOp),
            /// The collective family: warp shuffles ([`collective`](crate::lir::collective)); a shuffle declares a variable.
            Collective($crate::lir::CollectiveOp),
            /// The asynchronous family: `cp.async`, its groups, mbarriers, proxy fences, TMA, bulk copies ([`asynch`](crate::lir::asynch)).
            Async($crate::lir::AsyncOp),
            /// The bounds family: a region must lie inside a logical shape ([`bounds`](crate::lir::bounds); no code on the GPU).
            Bounds($crate::lir::BoundsCheck),
            /// The debug family: `printf` from a kernel ([`debug`](crate::lir::debug)).
            Debug($crate::lir::DebugOp),
        }
    };
}
