//! Simulator of the **debug** family (`printf`, `docs/lir.md` §2.15): each
//! executing thread formats its line as C's `printf` does (the host formats
//! CUDA's device `printf` too) and the machine keeps it; the run's report gives
//! the lines in thread order — by CTA, then thread, then program order — also
//! when an error stops the run (`SimError::printed`).

use crate::compile::{Compile, Compiler, Reg};
use crate::error::SimError;
use crate::exec::Machine;
use crate::family::{FamilyIns, Flow};
use tirx_ir::lir::debug::{parse_format, Conv, Piece};
use tirx_ir::lir::DebugOp;
use tirx_ir::DType;

/// A line a thread printed.
#[derive(Clone, Debug)]
pub(crate) struct Printed {
    pub cta: [u32; 3],
    pub thread: u32,
    pub text: String,
}

#[derive(Clone, Debug)]
pub(crate) struct PrintfIns {
    site: u32,
    pieces: Vec<Piece>,
    /// Each conversion's argument: its register and type.
    args: Vec<(Reg, DType)>,
}

impl Compile for DebugOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        let DebugOp::Printf { format, args } = self;
        let pieces = parse_format(format).map_err(|e| c.invalid(format!("printf: {e}")))?;
        let mut regs = Vec::with_capacity(args.len());
        for a in args {
            let t = c.ty(a)?;
            regs.push((c.expr(a)?, t));
        }
        let site = c.site();
        c.emit_family(PrintfIns { site, pieces, args: regs });
        Ok(())
    }
}

impl FamilyIns for PrintfIns {
    fn name(&self) -> String {
        "`printf`".into()
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn step(&self, m: &mut Machine<'_>, t: u32, base: usize) -> Result<Flow, SimError> {
        let mut text = String::new();
        let mut args = self.args.iter();
        for p in &self.pieces {
            match p {
                Piece::Text(s) => text.push_str(s),
                Piece::Conv(c) => {
                    let Some(&(r, ty)) = args.next() else { break };
                    text.push_str(&format_value(*c, m.regs[base + r as usize], ty));
                }
            }
        }
        m.printed.push(Printed { cta: m.cta, thread: t, text });
        Ok(Flow::Next)
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        self.args.iter_mut().for_each(|(r, _)| f(r))
    }
}

/// The lines in thread order: by CTA (x fastest, as CUDA numbers blocks), then
/// thread, then the order each thread printed them.
pub(crate) fn in_thread_order(mut lines: Vec<Printed>) -> Vec<String> {
    lines.sort_by_key(|p| (p.cta[2], p.cta[1], p.cta[0], p.thread));
    lines.into_iter().map(|p| p.text).collect()
}

/// One conversion of a register value of type `ty` (ints are held sign- or
/// zero-extended, floats as f64 bits).
fn format_value(c: Conv, bits: u64, ty: DType) -> String {
    if c.integral() {
        let v = if ty.is_float() { f64::from_bits(bits) as i64 } else { bits as i64 };
        integer(c, v, if ty.bits() == 64 { 64 } else { 32 })
    } else {
        let v = match ty {
            _ if ty.is_float() => f64::from_bits(bits),
            DType::U64 => bits as f64,
            _ => bits as i64 as f64,
        };
        float(c, v)
    }
}

/// `%d %i %u %x %X %o %c` of `v`, an argument of `bits` bits as C's varargs pass it.
fn integer(c: Conv, v: i64, bits: u32) -> String {
    if c.kind == 'c' {
        return pad(c, "", &char::from(v as u8).to_string(), false);
    }
    let unsigned = |v: i64| if bits == 64 { v as u64 } else { u64::from(v as u32) };
    let (sign, digits) = match c.kind {
        'd' | 'i' => {
            let s = if v < 0 {
                "-"
            } else if c.plus {
                "+"
            } else if c.space {
                " "
            } else {
                ""
            };
            let v = if bits == 64 { v } else { i64::from(v as i32) };
            (s, v.unsigned_abs().to_string())
        }
        'x' => ("", format!("{:x}", unsigned(v))),
        'X' => ("", format!("{:X}", unsigned(v))),
        'o' => ("", format!("{:o}", unsigned(v))),
        _ => ("", unsigned(v).to_string()),
    };
    // A precision is the least number of digits (and 0 with precision 0 prints none).
    let mut digits = match c.precision {
        Some(0) if digits == "0" => String::new(),
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        _ => digits,
    };
    let prefix = match c.kind {
        'x' if c.alt && unsigned(v) != 0 => "0x",
        'X' if c.alt && unsigned(v) != 0 => "0X",
        'o' if c.alt && !digits.starts_with('0') => {
            digits.insert(0, '0');
            ""
        }
        _ => "",
    };
    pad(c, &format!("{sign}{prefix}"), &digits, c.precision.is_none())
}

/// `%f %F %e %E %g %G` of `v`.
fn float(c: Conv, v: f64) -> String {
    let upper = c.kind.is_ascii_uppercase();
    let sign = if v.is_sign_negative() && !v.is_nan() {
        "-"
    } else if c.plus {
        "+"
    } else if c.space {
        " "
    } else {
        ""
    };
    let a = v.abs();
    if !a.is_finite() {
        let s = if a.is_nan() { "nan" } else { "inf" };
        let s = if upper { s.to_uppercase() } else { s.to_string() };
        return pad(Conv { zero: false, ..c }, sign, &s, false);
    }
    let p = c.precision.unwrap_or(6);
    let body = match c.kind.to_ascii_lowercase() {
        'f' => fixed(a, p, c.alt),
        'e' => scientific(a, p, c.alt),
        _ => general(a, p, c.alt),
    };
    let body = if upper { body.to_uppercase() } else { body };
    pad(c, sign, &body, true)
}

fn fixed(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$}");
    if alt && p == 0 {
        format!("{s}.")
    } else {
        s
    }
}

/// `d.ddde±XX` (at least two exponent digits, as C).
fn scientific(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let m = if alt && p == 0 { format!("{m}.") } else { m.to_string() };
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// `%g`: `%e` when the exponent is below -4 or at least the precision, else `%f`,
/// trailing zeros dropped unless `#`.
fn general(a: f64, p: usize, alt: bool) -> String {
    let p = p.max(1);
    let e: i32 = format!("{a:.*e}", p - 1).split_once('e').and_then(|(_, e)| e.parse().ok()).unwrap_or(0);
    let s = if a != 0.0 && (e < -4 || e >= p as i32) {
        scientific(a, p - 1, alt)
    } else {
        fixed(a, (p as i32 - 1 - e).max(0) as usize, alt)
    };
    if alt {
        return s;
    }
    let (m, exp) = match s.split_once('e') {
        Some((m, e)) => (m.to_string(), format!("e{e}")),
        None => (s, String::new()),
    };
    let m = if m.contains('.') { m.trim_end_matches('0').trim_end_matches('.').to_string() } else { m };
    format!("{m}{exp}")
}

/// `sign` + `body` in the field's width: left-justified with `-`, zero-padded
/// after the sign with `0` (when `zeros` allows it), else space-padded.
fn pad(c: Conv, sign: &str, body: &str, zeros: bool) -> String {
    let len = sign.len() + body.len();
    let fill = c.width.unwrap_or(0).saturating_sub(len);
    if c.left {
        format!("{sign}{body}{}", " ".repeat(fill))
    } else if c.zero && zeros {
        format!("{sign}{}{body}", "0".repeat(fill))
    } else {
        format!("{}{sign}{body}", " ".repeat(fill))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::lir::debug::conversions;

    fn fmt(spec: &str, v: f64) -> String {
        float(conversions(spec)[0], v)
    }

    fn int(spec: &str, v: i64, bits: u32) -> String {
        integer(conversions(spec)[0], v, bits)
    }

    /// Against C's printf (glibc), case by case.
    #[test]
    fn conversions_print_as_c_does() {
        for (spec, v, want) in [
            ("%d", -42, "-42"),
            ("%+5d", 42, "  +42"),
            ("%-5d|", 42, "42   |"),
            ("%05d", -42, "-0042"),
            ("%.3d", 7, "007"),
            ("%.0d", 0, ""),
            ("%x", -1, "ffffffff"),
            ("%#X", 255, "0XFF"),
            ("%#o", 8, "010"),
            ("%u", -1, "4294967295"),
            ("%c", 65, "A"),
        ] {
            // A `|` marks where the field ends (trailing spaces); it is not printed.
            assert_eq!(int(spec.trim_end_matches('|'), v, 32), want.trim_end_matches('|'), "{spec} of {v}");
        }
        assert_eq!(int("%d", -(1i64 << 40), 64), "-1099511627776");
        assert_eq!(int("%x", -1, 64), "ffffffffffffffff");
        for (spec, v, want) in [
            ("%f", 1.5, "1.500000"),
            ("%.2f", -0.125, "-0.12"),
            ("%8.3f", 1.23456, "   1.235"),
            ("%-8.1f|", 2.0, "2.0     "),
            ("%+08.2f", 3.5, "+0003.50"),
            ("%e", 12345.678, "1.234568e+04"),
            ("%.2E", 0.000123, "1.23E-04"),
            ("%g", 100000.0, "100000"),
            ("%g", 1000000.0, "1e+06"),
            ("%g", 0.0001, "0.0001"),
            ("%g", 0.00001, "1e-05"),
            ("%g", 1.5, "1.5"),
            ("%.3g", 1.23456, "1.23"),
            ("%#g", 1.5, "1.50000"),
            ("%g", 0.0, "0"),
            ("%f", f64::INFINITY, "inf"),
            ("%5.1f", f64::NEG_INFINITY, " -inf"),
            ("%F", f64::NAN, "NAN"),
            ("%f", -0.0, "-0.000000"),
            // Ties of the exact binary value round to even, as glibc does.
            ("%.1f", 0.25, "0.2"),
            ("%.0f", 0.5, "0"),
            ("%.0f", 1.5, "2"),
            ("%g", 123456789.0, "1.23457e+08"),
            ("%.10g", 1.0 / 3.0, "0.3333333333"),
            ("%e", 0.0, "0.000000e+00"),
        ] {
            assert_eq!(fmt(spec.trim_end_matches('|'), v), want, "{spec} of {v}");
        }
    }
}
