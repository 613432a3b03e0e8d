//! CUDA for the **collective** family: a shuffle is one `__shfl_*_sync` call
//! declaring its variable. The intrinsics have overloads for every type a
//! shuffle may move (`cuda_fp16.h` / `cuda_bf16.h` for the 16-bit floats, which
//! [`Ctx::note_type`] includes):
//!
//! ```text
//! const float s1 = __shfl_xor_sync(0xffffffffu, s0, 16, 32);
//! ```
//!
//! Unlike a `let`, a shuffle is printed even when its variable is never read:
//! the lanes of its mask execute it together, so dropping it is never a local decision.

use crate::ctype::c_type;
use crate::emit::{Ctx, Emit};
use crate::CodegenError;
use tirx_ir::lir::{CollectiveOp, ShuffleMode};

impl Emit for CollectiveOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        cx.collective(self)?;
        Ok(true)
    }
}

impl Ctx<'_> {
    fn collective(&mut self, c: &CollectiveOp) -> Result<(), CodegenError> {
        let CollectiveOp::Shuffle { var, value, mode, lane_or_delta, width, mask } = c;
        let f = match mode {
            ShuffleMode::Bfly => "__shfl_xor_sync",
            ShuffleMode::Down => "__shfl_down_sync",
            ShuffleMode::Up => "__shfl_up_sync",
            ShuffleMode::Idx => "__shfl_sync",
        };
        let t = self.k.var(*var).dtype;
        self.note_type(t);
        // Operands first: they may name an outer variable the new one shadows.
        let (v, l) = (self.e(value)?, self.e(lane_or_delta)?);
        let n = self.names.declare(*var, &self.k.var(*var).name);
        self.line(&format!("const {} {n} = {f}({mask:#010x}u, {v}, {l}, {width});", c_type(t)));
        Ok(())
    }
}
