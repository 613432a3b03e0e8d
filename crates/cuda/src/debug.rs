//! CUDA for the **debug** family: `printf` is CUDA's device `printf`, the
//! format written back with the length modifier each argument's type needs
//! (`ll` for 64-bit integers) and the arguments as C's varargs take them
//! (floats as `double`, 16-bit floats through `float`, a `%c` as `int`):
//!
//! ```text
//! printf("row %d: %8.3f\n", row, (double)acc[0]);
//! ```

use crate::emit::{Ctx, Emit};
use crate::CodegenError;
use tirx_ir::lir::debug::{parse_format, Piece};
use tirx_ir::lir::DebugOp;
use tirx_ir::DType;

impl Emit for DebugOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        let DebugOp::Printf { format, args } = self;
        let pieces = parse_format(format).map_err(CodegenError::Unsupported)?;
        let (mut fmt, mut vals) = (String::new(), vec![]);
        let mut next = args.iter();
        for p in pieces {
            match p {
                Piece::Text(t) => fmt.push_str(&t.replace('%', "%%")),
                Piece::Conv(c) => {
                    let a = next.next().ok_or_else(|| CodegenError::Unsupported("printf: too few arguments".into()))?;
                    let t = cx.k.dtype_of(a);
                    let v = cx.e(a)?;
                    let (length, v) = match (c.kind, t) {
                        ('c', _) => ("", format!("(int)({v})")),
                        (_, DType::I64 | DType::U64) => ("ll", v),
                        (_, DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2) => {
                            ("", format!("(double)(float)({v})"))
                        }
                        (_, t) if t.is_float() => ("", format!("(double)({v})")),
                        _ => ("", v),
                    };
                    fmt.push_str(&c.c_spec(length));
                    vals.push(v);
                }
            }
        }
        let mut call = format!("printf({}", c_string(&fmt));
        for v in vals {
            call.push_str(&format!(", {v}"));
        }
        cx.line(&format!("{call});"));
        Ok(true)
    }
}

/// `s` as a C string literal: quotes, backslashes and every byte outside
/// printable ASCII escaped (octal escapes cannot run into the next character).
fn c_string(s: &str) -> String {
    let mut out = String::from("\"");
    for b in s.bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::c_string;

    #[test]
    fn strings_are_escaped_for_c() {
        assert_eq!(c_string("a\"b\\c\n\t%d é"), "\"a\\\"b\\\\c\\n\\t%d \\303\\251\"");
    }
}
