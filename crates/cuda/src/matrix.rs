//! CUDA for the **matrix** family: `ldmatrix` / `stmatrix` as calls of small
//! inline-PTX helpers, one per (direction, `.x{num}`, `.trans`), taking this
//! lane's row address and its fragment registers:
//!
//! ```text
//! tirx_ldmatrix_x2(&A_smem[row * 64 + col], &R[0], &R[2]);
//! ```

use crate::emit::Ctx;
use crate::helpers::Helper;
use crate::CodegenError;
use std::fmt::Write;
use tirx_ir::lir::{MatrixDir, MatrixOp};

impl Ctx<'_> {
    pub(crate) fn matrix(&mut self, m: &MatrixOp) -> Result<(), CodegenError> {
        let h = Helper::Matrix { store: m.dir == MatrixDir::Store, num: m.num, trans: m.trans };
        self.helpers.insert(h);
        let mut args = vec![self.addr(m.smem, &m.smem_index)?];
        for i in &m.reg_index {
            args.push(self.addr(m.regs, i)?);
        }
        self.line(&format!("{}({});", h.name(), args.join(", ")));
        Ok(())
    }
}

/// The helper's name: `tirx_ldmatrix_x4_trans`.
pub(crate) fn helper_name(store: bool, num: u8, trans: bool) -> String {
    let instr = if store { "stmatrix" } else { "ldmatrix" };
    format!("tirx_{instr}_x{num}{}", if trans { "_trans" } else { "" })
}

/// `ldmatrix`/`stmatrix` of `num` 8x8 b16 tiles: this lane's row address and
/// its `num` 32-bit fragment registers (each two 16-bit elements in memory).
pub(crate) fn helper_source(store: bool, num: u8, trans: bool) -> String {
    let (load, instr) = (!store, if store { "stmatrix" } else { "ldmatrix" });
    let n = usize::from(num);
    let regs: Vec<String> = (0..n).map(|i| format!("void* r{i}")).collect();
    let ptx_regs: Vec<String> = (0..n).map(|i| format!("%{}", if load { i } else { i + 1 })).collect();
    let addr_slot = if load { n } else { 0 };
    let t = if trans { ".trans" } else { "" };
    let body = if load {
        format!("{{{}}}, [%{addr_slot}]", ptx_regs.join(", "))
    } else {
        format!("[%{addr_slot}], {{{}}}", ptx_regs.join(", "))
    };
    let reg = |i: usize| format!("*static_cast<unsigned*>(r{i})");
    let mut s = String::new();
    let name = helper_name(store, num, trans);
    let _ = writeln!(s, "__device__ __forceinline__ void {name}(const void* row, {}) {{", regs.join(", "));
    let _ = writeln!(s, "    unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));");
    let _ = writeln!(s, "    asm volatile(\"{instr}.sync.aligned.m8n8.x{num}{t}.shared.b16 {body};\"");
    if load {
        let outs: Vec<String> = (0..n).map(|i| format!("\"=r\"({})", reg(i))).collect();
        let _ = writeln!(s, "                 : {}", outs.join(", "));
        let _ = writeln!(s, "                 : \"r\"(addr)");
    } else {
        let ins: Vec<String> = (0..n).map(|i| format!("\"r\"({})", reg(i))).collect();
        let _ = writeln!(s, "                 :");
        let _ = writeln!(s, "                 : \"r\"(addr), {}", ins.join(", "));
    }
    // "memory": the asm reads (ldmatrix) or writes (stmatrix) shared memory the compiler cannot see.
    let _ = writeln!(s, "                 : \"memory\");");
    s.push_str("}\n");
    s
}
