//! The **debug** family: `printf` from inside a kernel (`T.cuda.printf(fmt, *args)`).
//!
//! On the GPU it is CUDA's device `printf` (the lines appear when the host next
//! synchronises, in the order the GPU wrote them); in the simulator every thread's
//! lines are kept and shown after the run in thread order: by CTA, then thread,
//! then program order (`docs/lir.md` §2.15).
//!
//! The format is C's, a checked subset: text, `%%`, and conversions
//! `%[flags][width][.precision]conv` with flags `-+ #0`, decimal width and
//! precision, and `conv` one of `d i` (signed), `u x X o` (unsigned), `c` (a
//! character code), `f F e E g G` (floating point). Each conversion takes the next
//! argument: an integer or bool for the integer ones, a float for the float ones
//! (16-bit floats printed through f32, as C promotes them); no length modifier is
//! written — the CUDA printer adds `ll` for 64-bit integers, and casts what C's
//! varargs need. Typing: as many arguments as conversions, each of its kind.

use super::check::{Check, Checker};
use super::instr::Instr;
use super::print::Printer;
use super::LExpr;
use crate::dtype::DType;
use serde::Serialize;

/// An instruction of the debug family.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum DebugOp {
    /// `printf(format, args...)` by every thread that executes it.
    Printf { format: String, args: Vec<LExpr> },
}

/// A piece of a format string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (`%%` already turned into `%`).
    Text(String),
    Conv(Conv),
}

/// One `%...` conversion (`Default`: no flag, width or precision; `kind` set by the parser).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conv {
    pub left: bool,
    pub plus: bool,
    pub space: bool,
    pub alt: bool,
    pub zero: bool,
    pub width: Option<usize>,
    pub precision: Option<usize>,
    /// `d i u x X o c f F e E g G`.
    pub kind: char,
}

impl Conv {
    /// Whether it prints an integer argument (else a floating-point one).
    pub fn integral(self) -> bool {
        matches!(self.kind, 'd' | 'i' | 'u' | 'x' | 'X' | 'o' | 'c')
    }

    /// The conversion as C writes it, with `length` (`ll`) before its letter.
    pub fn c_spec(self, length: &str) -> String {
        let mut s = String::from("%");
        for (on, c) in [(self.left, '-'), (self.plus, '+'), (self.space, ' '), (self.alt, '#'), (self.zero, '0')] {
            if on {
                s.push(c);
            }
        }
        if let Some(w) = self.width {
            s.push_str(&w.to_string());
        }
        if let Some(p) = self.precision {
            s.push_str(&format!(".{p}"));
        }
        s.push_str(length);
        s.push(self.kind);
        s
    }
}

/// The widest width or precision a conversion may ask for (a kernel's line stays short).
pub const MAX_FIELD: usize = 512;

/// Splits a format into text and conversions; `Err` says what is wrong and where.
pub fn parse_format(format: &str) -> Result<Vec<Piece>, String> {
    let mut out = vec![];
    let mut text = String::new();
    let mut it = format.char_indices().peekable();
    while let Some((at, c)) = it.next() {
        if c != '%' {
            text.push(c);
            continue;
        }
        if it.peek().map(|&(_, n)| n) == Some('%') {
            it.next();
            text.push('%');
            continue;
        }
        let mut conv = Conv::default();
        while let Some(&(_, f)) = it.peek() {
            let flag = match f {
                '-' => &mut conv.left,
                '+' => &mut conv.plus,
                ' ' => &mut conv.space,
                '#' => &mut conv.alt,
                '0' => &mut conv.zero,
                _ => break,
            };
            *flag = true;
            it.next();
        }
        let number = |it: &mut std::iter::Peekable<std::str::CharIndices>| -> Result<Option<usize>, String> {
            let mut digits = String::new();
            while let Some(&(_, d)) = it.peek().filter(|(_, d)| d.is_ascii_digit()) {
                digits.push(d);
                it.next();
            }
            if digits.is_empty() {
                return Ok(None);
            }
            match digits.parse::<usize>() {
                Ok(n) if n <= MAX_FIELD => Ok(Some(n)),
                _ => Err(format!("the conversion at byte {at} asks for a field of {digits}; at most {MAX_FIELD}")),
            }
        };
        conv.width = number(&mut it)?;
        if it.peek().map(|&(_, n)| n) == Some('.') {
            it.next();
            conv.precision = Some(number(&mut it)?.unwrap_or(0));
        }
        match it.next() {
            Some((_, k)) if "diuxXocfFeEgG".contains(k) => conv.kind = k,
            Some((_, k)) => {
                let why = match k {
                    'l' | 'h' | 'z' | 'j' | 't' | 'L' => {
                        "write the conversion without a length modifier: the argument's type gives it".to_string()
                    }
                    '*' => "a width or precision from an argument (`*`) is not supported: write the number".into(),
                    's' | 'p' | 'n' | 'a' | 'A' => format!("`%{k}` is not supported in a kernel"),
                    _ => format!("`%{k}` is not a conversion"),
                };
                return Err(format!(
                    "the conversion at byte {at}: {why} (conversions: d i u x X o c f F e E g G, and %%)"
                ));
            }
            None => return Err(format!("the format ends inside the conversion at byte {at}")),
        }
        if !text.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut text)));
        }
        out.push(Piece::Conv(conv));
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// The conversions of a format, in order (the format must parse).
pub fn conversions(format: &str) -> Vec<Conv> {
    parse_format(format)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Conv(c) => Some(c),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Whether a value of type `t` may be printed by `c`: integers and bools by the
/// integer conversions, floats by the float ones.
pub fn printable(c: Conv, t: DType) -> bool {
    if c.integral() {
        t.is_int() || t == DType::Bool
    } else {
        t.is_float()
    }
}

impl Instr for DebugOp {
    fn name(&self) -> String {
        "printf".into()
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            DebugOp::Printf { args, .. } => args.iter().collect(),
        }
    }

    fn check(&self, c: &mut Checker) -> Check {
        let DebugOp::Printf { format, args } = self;
        parse_format(format)?;
        let convs = conversions(format);
        if convs.len() != args.len() {
            return Err(format!("printf: the format has {} conversion(s) for {} argument(s)", convs.len(), args.len()));
        }
        for (i, (conv, a)) in convs.iter().zip(args).enumerate() {
            let t = c.expr(a)?;
            if !printable(*conv, t) {
                return Err(format!("printf: argument {i} is {t}, which `%{}` does not print", conv.kind));
            }
        }
        Ok(())
    }

    fn print(&self, p: &Printer) -> String {
        let DebugOp::Printf { format, args } = self;
        let args: Vec<String> = args.iter().map(|a| p.e(a)).collect();
        let mut s = format!("printf {format:?}");
        for a in args {
            s.push_str(&format!(", {a}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_split_into_text_and_conversions() {
        let p = parse_format("x=%-08.3f, %d%%\n").unwrap();
        assert_eq!(p.len(), 5);
        assert_eq!(p[0], Piece::Text("x=".into()));
        let Piece::Conv(c) = p[1] else { panic!() };
        assert!(c.left && c.zero && !c.plus);
        assert_eq!((c.width, c.precision, c.kind), (Some(8), Some(3), 'f'));
        assert_eq!(c.c_spec(""), "%-08.3f");
        assert_eq!(p[3], Piece::Conv(Conv { kind: 'd', ..Conv::default() }));
        assert_eq!(p[4], Piece::Text("%\n".into()));
        assert_eq!(conversions("%5.2e %x").iter().map(|c| c.c_spec("ll")).collect::<Vec<_>>(), ["%5.2lle", "%llx"]);
    }

    #[test]
    fn unsupported_conversions_say_what_to_write() {
        for (f, words) in [
            ("%ld", "without a length modifier"),
            ("%s", "`%s` is not supported"),
            ("%*d", "`*`"),
            ("%q", "`%q` is not a conversion"),
            ("abc %", "ends inside the conversion"),
            ("%9999d", "at most 512"),
        ] {
            let e = parse_format(f).unwrap_err();
            assert!(e.contains(words), "{f}: {e}");
        }
        assert!(printable(conversions("%d")[0], DType::Bool));
        assert!(!printable(conversions("%f")[0], DType::I32));
        assert!(printable(conversions("%g")[0], DType::BF16));
    }
}
