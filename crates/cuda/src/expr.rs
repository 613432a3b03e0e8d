//! LIR expressions as C expressions.
//!
//! Each expression prints to a [`Doc`] (`doc`: C text that remembers its
//! precedence). Per-dtype choices: `sqrtf`/`sqrt`/`hsqrt`, `tirx_min`/`__hmin_nan` (NaN-propagating);
//! 8-bit floats and the few operations CUDA lacks for 16-bit floats compute
//! through `float`; Python-style `FloorDiv`/`FloorMod` call small helpers;
//! rounded arithmetic is one intrinsic per operation and mode (`round`).

use crate::ctype::{c_type, float_literal, int_literal, is_fp8, is_narrow_float};
use crate::doc::{call, cast_to, join, Doc, TERNARY, UNARY};
use crate::emit::Ctx;
use crate::helpers::{Helper, Num};
use crate::CodegenError;
use tirx_ir::hir::{MathFn, UnOp};
use tirx_ir::lir::{LBinOp, LExpr, RoundOp, Special};
use tirx_ir::DType;

impl Ctx<'_> {
    pub fn expr(&mut self, e: &LExpr) -> Result<Doc, CodegenError> {
        Ok(match e {
            LExpr::Int(v, t) => self.literal(int_literal(*v, *t)?, *t),
            LExpr::Float(v, t) => self.literal(float_literal(*v, *t)?, *t),
            LExpr::Bool(b) => Doc::atom(b.to_string()),
            LExpr::Var(v) => Doc::atom(self.names.var(*v).to_string()),
            LExpr::Special(s) => cast_to("int", Doc::atom(hw_register(*s))),
            LExpr::Bin(op, a, b) => {
                let t = self.k.dtype_of(a);
                let (a, b) = (self.operand(a)?, self.operand(b)?);
                self.binary(*op, t, a, b)?
            }
            LExpr::Un(op, a) => {
                let t = self.k.dtype_of(a);
                let a = self.operand(a)?;
                match op {
                    UnOp::Neg if is_fp8(t) => cast_to(c_type(t), Doc::unary(format!("-{}", as_float(a).text))),
                    // `--x` would be a decrement: parenthesize an operand that starts with a minus.
                    UnOp::Neg if a.text.starts_with('-') => Doc::unary(format!("-({})", a.text)),
                    UnOp::Neg => Doc::unary(format!("-{}", a.wrap_below(UNARY))),
                    UnOp::Not => Doc::unary(format!("!{}", a.wrap_below(UNARY))),
                    UnOp::BitNot => Doc::unary(format!("~{}", a.wrap_below(UNARY))),
                }
            }
            LExpr::Cast(t, a) => {
                // The hardware registers are unsigned: widen them directly.
                if let (LExpr::Special(s), DType::I64 | DType::U32 | DType::U64) = (&**a, t) {
                    return Ok(cast_to(c_type(*t), Doc::atom(hw_register(*s))));
                }
                let from = self.k.dtype_of(a);
                self.note_type(*t);
                let a = self.operand(a)?;
                convert(a, from, *t)
            }
            LExpr::Select(c, a, b) => {
                let (c, a, b) = (self.operand(c)?, self.operand(a)?, self.operand(b)?);
                let text = format!(
                    "{} ? {} : {}",
                    c.wrap_below(TERNARY + 1),
                    a.wrap_below(TERNARY + 1),
                    b.wrap_below(TERNARY + 1)
                );
                Doc { text, prec: TERNARY, op: None }
            }
            LExpr::Math(f, args) => {
                let [a] = args.as_slice() else {
                    return Err(CodegenError::InvalidLir(format!("{} takes one argument", f.name())));
                };
                let t = self.k.dtype_of(a);
                let a = self.operand(a)?;
                let helper = match f {
                    MathFn::Exp2Ftz => Some(Helper::Exp2Ftz),
                    MathFn::Exp2Fma => Some(Helper::Exp2Fma),
                    _ => None,
                };
                if let Some(h) = helper.filter(|_| t != DType::F64) {
                    self.helpers.insert(h);
                    let y = call(&h.name(), vec![if t == DType::F32 { a } else { as_float(a) }]);
                    return Ok(if t == DType::F32 { y } else { cast_to(c_type(t), y) });
                }
                math(*f, t, a)?
            }
            LExpr::Rounded(op, mode, args) => {
                let t = args.first().map_or(DType::F32, |a| self.k.dtype_of(a));
                let f = crate::round::intrinsic(*op, *mode, t)?;
                if let RoundOp::Cvt(to) = op {
                    self.note_type(*to);
                }
                let mut docs = Vec::with_capacity(args.len());
                for a in args {
                    docs.push(self.operand(a)?);
                }
                call(&f, docs)
            }
            LExpr::Load(b, i) => {
                let i = self.operand(i)?;
                Doc::atom(format!("{}[{}]", self.names.buf(*b), i.text))
            }
        })
    }

    /// `e` as an operand of another expression: a narrow integer result that C
    /// computed in `int` is converted back to its type first, so it wraps as in LIR.
    fn operand(&mut self, e: &LExpr) -> Result<Doc, CodegenError> {
        let d = self.expr(e)?;
        let t = self.k.dtype_of(e);
        let int_arith = match e {
            LExpr::Bin(op, ..) => !op.is_compare() && !op.is_logic(),
            LExpr::Un(op, _) => *op != UnOp::Not,
            LExpr::Math(..) => true,
            _ => false,
        };
        let narrow_int = matches!(t, DType::I8 | DType::I16 | DType::U8 | DType::U16);
        Ok(if int_arith && narrow_int { cast_to(c_type(t), d) } else { d })
    }

    fn literal(&mut self, text: String, t: DType) -> Doc {
        self.note_type(t);
        if text.starts_with('-') {
            Doc::unary(text)
        } else {
            Doc::atom(text)
        }
    }

    fn binary(&mut self, op: LBinOp, t: DType, a: Doc, b: Doc) -> Result<Doc, CodegenError> {
        use LBinOp::*;
        // 8-bit floats have no arithmetic: compute in float (and convert back unless it is a comparison).
        if is_fp8(t) && !matches!(op, And | Or) {
            let r = self.binary(op, DType::F32, as_float(a), as_float(b))?;
            return Ok(if op.is_compare() { r } else { cast_to(c_type(t), r) });
        }
        let narrow = is_narrow_float(t);
        Ok(match op {
            FloorDiv | FloorMod if narrow => {
                let r = self.binary(op, DType::F32, as_float(a), as_float(b))?;
                cast_to(c_type(t), r)
            }
            Rem if narrow => cast_to(c_type(t), call("fmodf", vec![as_float(a), as_float(b)])),
            Rem if t == DType::F32 => call("fmodf", vec![a, b]),
            Rem if t == DType::F64 => call("fmod", vec![a, b]),
            FloorDiv if t.is_float() => {
                let f = if t == DType::F32 { "floorf" } else { "floor" };
                call(f, vec![join(a, "/", b, Div, 11, false)])
            }
            FloorDiv | FloorMod if t.is_int() && !t.is_signed() => {
                // Unsigned operands are never negative: floor and truncation agree.
                let (sym, o) = if op == FloorDiv { ("/", Div) } else { ("%", Rem) };
                join(a, sym, b, o, 11, false)
            }
            FloorDiv | FloorMod => {
                let h = self.floor_helper(op, t)?;
                self.helpers.insert(h);
                call(&h.name(), vec![a, b])
            }
            Min | Max => {
                // Floats propagate NaN (docs/numerics.md §6), as PyTorch's max and min do.
                let pick = |names: [&'static str; 2]| names[usize::from(op == Max)];
                let f = match t {
                    DType::F32 | DType::F64 => {
                        let h = Helper::MinMax {
                            max: op == Max,
                            ty: if t == DType::F32 { Num::Float } else { Num::Double },
                        };
                        self.helpers.insert(h);
                        return Ok(call(&h.name(), vec![a, b]));
                    }
                    DType::F16 | DType::BF16 => pick(["__hmin_nan", "__hmax_nan"]),
                    // CUDA's integer overloads; 8/16-bit operands promote to `int`.
                    _ if t.is_int() => pick(["min", "max"]),
                    _ => return Err(CodegenError::Unsupported(format!("min/max of {t} values"))),
                };
                call(f, vec![a, b])
            }
            _ => {
                let (sym, p) = op.c_infix().expect("all other operators are infix");
                let assoc = t.is_int() && matches!(op, Add | Mul | BitAnd | BitOr | BitXor);
                join(a, sym, b, op, p, assoc)
            }
        })
    }

    /// The floor helper for `t` (8/16-bit ints use the `int` one after promotion).
    fn floor_helper(&self, op: LBinOp, t: DType) -> Result<Helper, CodegenError> {
        let ty = match t {
            DType::I8 | DType::I16 | DType::I32 => Num::Int,
            DType::I64 => Num::LongLong,
            DType::F32 if op == LBinOp::FloorMod => Num::Float,
            DType::F64 if op == LBinOp::FloorMod => Num::Double,
            _ => return Err(CodegenError::Unsupported(format!("{op:?} of {t} values"))),
        };
        Ok(if op == LBinOp::FloorDiv { Helper::FloorDiv { ty } } else { Helper::FloorMod { ty } })
    }
}

/// `threadIdx.x`, `blockIdx.y`, ... (unsigned in CUDA; LIR reads them as int32).
fn hw_register(s: Special) -> String {
    let (reg, axis) = match s {
        Special::ThreadIdx(a) => ("threadIdx", a),
        Special::BlockIdx(a) => ("blockIdx", a),
    };
    format!("{reg}.{}", ["x", "y", "z"][usize::from(axis.min(2))])
}

/// `x` as a `float` operand.
fn as_float(x: Doc) -> Doc {
    cast_to("float", x)
}

/// `(T)x` for a value of type `from`; narrow floats convert through `float`.
fn convert(a: Doc, from: DType, to: DType) -> Doc {
    if from == to {
        return a;
    }
    let narrow_from = is_narrow_float(from);
    if to == DType::Bool {
        return if narrow_from {
            Doc { text: format!("{} != 0.0f", as_float(a).text), prec: 7, op: Some(LBinOp::Ne) }
        } else {
            cast_to("bool", a)
        };
    }
    let via_float =
        (narrow_from && to != DType::F32) || (is_narrow_float(to) && from != DType::F32 && from != DType::F64);
    if via_float {
        cast_to(c_type(to), as_float(a))
    } else {
        cast_to(c_type(to), a)
    }
}

/// The CUDA math function for `f` on a `t` value.
fn math(f: MathFn, t: DType, a: Doc) -> Result<Doc, CodegenError> {
    use MathFn::*;
    if t.is_int() {
        return match (f, t) {
            (Abs, t) if !t.is_signed() => Ok(a),
            (Abs, DType::I64) => Ok(call("llabs", vec![a])),
            // 8/16-bit operands promote to `int`; `operand` narrows the result where it matters.
            (Abs, _) => Ok(call("abs", vec![a])),
            _ => Err(CodegenError::Unsupported(format!("{} of an integer ({t})", f.name()))),
        };
    }
    let (f32_name, f64_name, half_name) = match f {
        Sqrt => ("sqrtf", "sqrt", Some("hsqrt")),
        Rsqrt => ("rsqrtf", "rsqrt", Some("hrsqrt")),
        Exp => ("expf", "exp", Some("hexp")),
        Exp2 => ("exp2f", "exp2", Some("hexp2")),
        // (float and narrower: `tirx_exp2_ftz`, `tirx_exp2_fma`, above)
        Exp2Ftz | Exp2Fma => ("exp2f", "exp2", None),
        Log => ("logf", "log", Some("hlog")),
        Log2 => ("log2f", "log2", Some("hlog2")),
        Abs => ("fabsf", "fabs", Some("__habs")),
        Floor => ("floorf", "floor", Some("hfloor")),
        Ceil => ("ceilf", "ceil", Some("hceil")),
        Tanh => ("tanhf", "tanh", None),
        Sin => ("sinf", "sin", Some("hsin")),
        Cos => ("cosf", "cos", Some("hcos")),
        Erf => ("erff", "erf", None),
        Erfc => ("erfcf", "erfc", None),
        Log1p => ("log1pf", "log1p", None),
    };
    Ok(match (t, half_name) {
        (DType::F32, _) => call(f32_name, vec![a]),
        (DType::F64, _) => call(f64_name, vec![a]),
        (DType::F16 | DType::BF16, Some(h)) => call(h, vec![a]),
        // 8-bit floats, and tanh of 16-bit floats: through float.
        _ => cast_to(c_type(t), call(f32_name, vec![as_float(a)])),
    })
}
