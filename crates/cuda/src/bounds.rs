//! CUDA for the **bounds** family: nothing. The simulator checks a bounds
//! assertion; the GPU does not (`docs/lir.md` §2.7).

use crate::emit::{Ctx, Emit};
use crate::CodegenError;
use tirx_ir::lir::BoundsCheck;

impl Emit for BoundsCheck {
    fn emit(&self, _: &mut Ctx) -> Result<bool, CodegenError> {
        Ok(false)
    }

    fn prints(&self) -> bool {
        false
    }
}
