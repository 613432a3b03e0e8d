//! Small `__device__ __forceinline__` helpers, each emitted once and only when used.

use std::fmt::Write;

/// The C operand type of a floor helper (narrower integers promote to `int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Num {
    Int,
    LongLong,
    Float,
    Double,
}

impl Num {
    fn c(self) -> &'static str {
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
    FloorDiv {
        ty: Num,
    },
    /// Python `%` on signed integers and floats.
    FloorMod {
        ty: Num,
    },
    LdMatrix {
        num: u8,
        trans: bool,
    },
    StMatrix {
        num: u8,
        trans: bool,
    },
}

impl Helper {
    pub fn name(self) -> String {
        let t = |trans: bool| if trans { "_trans" } else { "" };
        match self {
            Helper::FloorDiv { .. } => "tirx_floordiv".into(),
            Helper::FloorMod { .. } => "tirx_floormod".into(),
            Helper::LdMatrix { num, trans } => format!("tirx_ldmatrix_x{num}{}", t(trans)),
            Helper::StMatrix { num, trans } => format!("tirx_stmatrix_x{num}{}", t(trans)),
        }
    }

    /// The helper's definition.
    pub fn source(self) -> String {
        match self {
            Helper::FloorDiv { ty } => format!(
                "// Python-style a // b: rounds toward negative infinity.\n\
                 __device__ __forceinline__ {t} tirx_floordiv({t} a, {t} b) {{\n    \
                 {t} q = a / b;\n    \
                 return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;\n}}\n",
                t = ty.c()
            ),
            Helper::FloorMod { ty } => {
                let (rem, zero) = match ty {
                    Num::Int | Num::LongLong => ("a % b", "0"),
                    Num::Float => ("fmodf(a, b)", "0.0f"),
                    Num::Double => ("fmod(a, b)", "0.0"),
                };
                format!(
                    "// Python-style a % b: the result has the sign of b.\n\
                     __device__ __forceinline__ {t} tirx_floormod({t} a, {t} b) {{\n    \
                     {t} r = {rem};\n    \
                     return (r != {zero} && (r < {zero}) != (b < {zero})) ? r + b : r;\n}}\n",
                    t = ty.c()
                )
            }
            Helper::LdMatrix { num, trans } => matrix_helper(self, "ldmatrix", num, trans),
            Helper::StMatrix { num, trans } => matrix_helper(self, "stmatrix", num, trans),
        }
    }
}

/// `ldmatrix`/`stmatrix` of `num` 8x8 b16 tiles: this lane's row address and
/// its `num` 32-bit fragment registers (each two 16-bit elements in memory).
fn matrix_helper(h: Helper, instr: &str, num: u8, trans: bool) -> String {
    let load = instr == "ldmatrix";
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
    let _ = writeln!(s, "__device__ __forceinline__ void {}(const void* row, {}) {{", h.name(), regs.join(", "));
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
