//! Lexer for the TVMScript subset: Python tokens plus `Newline`/`Indent`/`Dedent`.
//!
//! Newlines inside brackets are implicit line joins (no token). To keep one
//! unclosed bracket from swallowing the rest of the file, a line inside brackets
//! that is indented no deeper than the line that opened the bracket (and does not
//! start by closing one) ends the bracket with an "unclosed" error.

use tirx_ir::{Diagnostic, Span};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    /// Punctuation and operators, e.g. `(`, `//`, `**`, `==`, `->`.
    Op(&'static str),
    Newline,
    Indent,
    Dedent,
    Eof,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

/// Longest first, so that `//=` wins over `//` over `/`.
const OPS: [&str; 46] = [
    "**=", "//=", ">>=", "<<=", "...", "->", "**", "//", "==", "!=", "<=", ">=", "<<", ">>", "+=", "-=", "*=", "/=",
    "%=", "&=", "|=", "^=", ":=", "(", ")", "[", "]", "{", "}", ",", ":", ";", ".", "+", "-", "*", "/", "%", "@", "<",
    ">", "=", "&", "|", "^", "~",
];

/// Nesting of brackets that the lexer tolerates (fuzz guard).
const MAX_BRACKET_DEPTH: usize = 200;

/// The message of the (once per file) bracket-nesting error.
pub const BRACKETS_TOO_DEEP: &str = "brackets nested too deeply";

struct Open {
    ch: char,
    span: Span,
    /// Indentation of the line that opened it.
    indent: usize,
}

pub fn lex(src: &str, diags: &mut Vec<Diagnostic>) -> Vec<Token> {
    Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        out: vec![],
        indents: vec![0],
        opens: vec![],
        too_deep: 0,
        deep_reported: false,
        line_indent: 0,
    }
    .run(diags)
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    out: Vec<Token>,
    indents: Vec<usize>,
    opens: Vec<Open>,
    /// Brackets open beyond [`MAX_BRACKET_DEPTH`] (not in `opens`): their closers match them silently.
    too_deep: usize,
    /// "nested too deeply" is reported once per file.
    deep_reported: bool,
    line_indent: usize,
}

impl Lexer<'_> {
    fn push(&mut self, tok: Tok, lo: usize, hi: usize) {
        self.out.push(Token { tok, span: Span::new(lo, hi) });
    }

    fn run(mut self, diags: &mut Vec<Diagnostic>) -> Vec<Token> {
        let mut at_line_start = true;
        while self.pos < self.bytes.len() {
            if diags.len() >= crate::MAX_DIAGS {
                crate::stop_reporting(diags, Span::new(self.pos, self.pos));
                self.pos = self.bytes.len();
                break;
            }
            if at_line_start {
                at_line_start = false;
                if !self.line_start(diags) {
                    continue;
                }
            }
            let c = self.peek_char();
            let lo = self.pos;
            match c {
                ' ' | '\t' | '\x0c' | '\r' => self.pos += 1,
                '#' => self.skip_comment(),
                '\\' if self.bytes.get(self.pos + 1) == Some(&b'\n') => self.pos += 2,
                '\n' => {
                    self.pos += 1;
                    if self.opens.is_empty() {
                        self.newline(lo);
                    }
                    at_line_start = true;
                }
                '"' | '\'' => self.string(diags),
                c if c.is_ascii_digit() || (c == '.' && self.next_is_digit()) => self.number(diags),
                c if c == '_' || c.is_alphabetic() => {
                    while self.pos < self.bytes.len() {
                        let c = self.peek_char();
                        if c == '_' || c.is_alphanumeric() {
                            self.pos += c.len_utf8();
                        } else {
                            break;
                        }
                    }
                    let name = self.src[lo..self.pos].to_string();
                    self.push(Tok::Name(name), lo, self.pos);
                }
                _ => self.op(diags),
            }
        }
        let end = self.bytes.len();
        self.close_all(diags);
        if !matches!(self.out.last().map(|t| &t.tok), None | Some(Tok::Newline)) {
            self.push(Tok::Newline, end, end);
        }
        while self.indents.len() > 1 {
            self.indents.pop();
            self.push(Tok::Dedent, end, end);
        }
        self.push(Tok::Eof, end, end);
        self.out
    }

    /// Reports the open brackets as unclosed and forgets them: each of a few,
    /// or the outermost with a count when there are many (one `(((((` line is one error).
    fn close_all(&mut self, diags: &mut Vec<Diagnostic>) {
        let opens = std::mem::take(&mut self.opens);
        let more = opens.len().saturating_sub(1) + self.too_deep;
        self.too_deep = 0;
        match opens.first() {
            Some(first) if more > 2 => {
                diags.push(unclosed(first).with_note(format!("{more} more brackets opened after it are unclosed too")))
            }
            _ => diags.extend(opens.iter().map(unclosed)),
        }
    }

    fn peek_char(&self) -> char {
        self.src[self.pos..].chars().next().unwrap_or('\0')
    }

    fn next_is_digit(&self) -> bool {
        self.bytes.get(self.pos + 1).is_some_and(|b| b.is_ascii_digit())
    }

    fn skip_comment(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
            self.pos += 1;
        }
    }

    fn newline(&mut self, lo: usize) {
        if !matches!(self.out.last().map(|t| &t.tok), None | Some(Tok::Newline) | Some(Tok::Indent) | Some(Tok::Dedent))
        {
            self.push(Tok::Newline, lo, lo + 1);
        }
    }

    /// Measures indentation at the start of a line; emits Indent/Dedent for
    /// logical lines. Returns false when the line is blank or a comment.
    fn line_start(&mut self, diags: &mut Vec<Diagnostic>) -> bool {
        let lo = self.pos;
        let mut width = 0;
        while self.pos < self.bytes.len() {
            match self.bytes[self.pos] {
                b' ' => width += 1,
                b'\t' => width = (width / 8 + 1) * 8,
                b'\r' | b'\x0c' => {}
                _ => break,
            }
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            None | Some(b'\n') | Some(b'#') => return false,
            _ => {}
        }
        if let Some(first) = self.opens.first() {
            let closes = matches!(self.bytes[self.pos], b')' | b']' | b'}');
            if width > first.indent || closes {
                return true;
            }
            self.close_all(diags);
            // The bracketed statement ends here.
            let at = self.pos;
            self.push(Tok::Newline, at, at);
        }
        self.line_indent = width;
        let top = *self.indents.last().unwrap_or(&0);
        if width > top {
            self.indents.push(width);
            self.push(Tok::Indent, lo, self.pos);
        } else if width < top {
            while width < *self.indents.last().unwrap_or(&0) {
                self.indents.pop();
                self.push(Tok::Dedent, self.pos, self.pos);
            }
            if width != *self.indents.last().unwrap_or(&0) {
                diags.push(
                    Diagnostic::error(Span::new(lo, self.pos), "inconsistent indentation")
                        .with_label("does not match any outer indentation level")
                        .with_help("indent this line like the block it belongs to"),
                );
                self.indents.push(width);
            }
        }
        true
    }

    fn op(&mut self, diags: &mut Vec<Diagnostic>) {
        let lo = self.pos;
        let rest = &self.src[lo..];
        let first = self.bytes[lo];
        let Some(op) = OPS.iter().copied().find(|o| o.as_bytes()[0] == first && rest.starts_with(o)) else {
            let c = self.peek_char();
            self.pos += c.len_utf8();
            diags.push(
                Diagnostic::error(Span::new(lo, self.pos), format!("unexpected character `{}`", c.escape_default()))
                    .with_label("not part of the script language"),
            );
            return;
        };
        self.pos += op.len();
        let span = Span::new(lo, self.pos);
        match op {
            "(" | "[" | "{" => {
                if self.opens.len() >= MAX_BRACKET_DEPTH {
                    // Once per file: 10,000 `(` are one mistake, not 9,800.
                    self.too_deep += 1;
                    if !self.deep_reported {
                        self.deep_reported = true;
                        diags.push(
                            Diagnostic::error(span, BRACKETS_TOO_DEEP)
                                .with_label(format!("more than {MAX_BRACKET_DEPTH} open brackets"))
                                .with_help("simplify the expression"),
                        );
                    }
                } else {
                    let ch = op.chars().next().unwrap_or('(');
                    self.opens.push(Open { ch, span, indent: self.line_indent });
                }
            }
            ")" | "]" | "}" => {
                let want = match op {
                    ")" => '(',
                    "]" => '[',
                    _ => '{',
                };
                match self.opens.last() {
                    _ if self.too_deep > 0 => self.too_deep -= 1,
                    Some(o) if o.ch == want => {
                        self.opens.pop();
                    }
                    Some(o) => {
                        let o_span = o.span;
                        let o_ch = o.ch;
                        diags.push(
                            Diagnostic::error(span, format!("mismatched `{op}`"))
                                .with_label(format!("expected the closing bracket of `{o_ch}`"))
                                .with_secondary(o_span, "opened here"),
                        );
                        // Close the mismatched one as well so the nesting recovers.
                        self.opens.pop();
                    }
                    None => {
                        diags.push(Diagnostic::error(span, format!("unmatched `{op}`")).with_label("nothing to close"));
                    }
                }
            }
            _ => {}
        }
        self.push(Tok::Op(op), lo, self.pos);
    }

    fn number(&mut self, diags: &mut Vec<Diagnostic>) {
        let lo = self.pos;
        let b = self.bytes;
        if b[lo] == b'0' && matches!(b.get(lo + 1), Some(b'x' | b'X' | b'b' | b'B' | b'o' | b'O')) {
            let radix = match b[lo + 1] {
                b'x' | b'X' => 16,
                b'b' | b'B' => 2,
                _ => 8,
            };
            self.pos += 2;
            while self.pos < b.len() && (b[self.pos].is_ascii_alphanumeric() || b[self.pos] == b'_') {
                self.pos += 1;
            }
            let digits: String = self.src[lo + 2..self.pos].chars().filter(|&c| c != '_').collect();
            match i64::from_str_radix(&digits, radix) {
                Ok(v) => self.push(Tok::Int(v), lo, self.pos),
                Err(_) => self.bad_number(lo, diags),
            }
            return;
        }
        let mut is_float = false;
        while self.pos < b.len() {
            let c = b[self.pos];
            if c.is_ascii_digit() || c == b'_' {
                self.pos += 1;
            } else if c == b'.' && !is_float {
                is_float = true;
                self.pos += 1;
            } else if (c == b'e' || c == b'E')
                && (b.get(self.pos + 1).is_some_and(|d| d.is_ascii_digit())
                    || (matches!(b.get(self.pos + 1), Some(b'+' | b'-'))
                        && b.get(self.pos + 2).is_some_and(|d| d.is_ascii_digit())))
            {
                is_float = true;
                self.pos += 2;
            } else {
                break;
            }
        }
        // A trailing identifier character (`12ab`) is part of a malformed number.
        while self.pos < b.len() && (b[self.pos].is_ascii_alphabetic() || b[self.pos] == b'_') {
            self.pos += 1;
        }
        let text: String = self.src[lo..self.pos].chars().filter(|&c| c != '_').collect();
        if is_float {
            match text.parse::<f64>() {
                Ok(v) if v.is_finite() => self.push(Tok::Float(v), lo, self.pos),
                _ => self.bad_number(lo, diags),
            }
        } else {
            match text.parse::<i64>() {
                Ok(v) => self.push(Tok::Int(v), lo, self.pos),
                Err(_) => self.bad_number(lo, diags),
            }
        }
    }

    fn bad_number(&mut self, lo: usize, diags: &mut Vec<Diagnostic>) {
        diags.push(
            Diagnostic::error(Span::new(lo, self.pos), format!("invalid number `{}`", &self.src[lo..self.pos]))
                .with_label("not a number that fits in 64 bits")
                .with_help("integers must fit in int64; floats must be finite"),
        );
        self.push(Tok::Int(0), lo, self.pos);
    }

    fn string(&mut self, diags: &mut Vec<Diagnostic>) {
        let lo = self.pos;
        let q = self.bytes[lo];
        let triple = self.bytes.get(lo + 1) == Some(&q) && self.bytes.get(lo + 2) == Some(&q);
        self.pos += if triple { 3 } else { 1 };
        let mut text = String::new();
        loop {
            if self.pos >= self.bytes.len() || (!triple && self.bytes[self.pos] == b'\n') {
                diags.push(
                    Diagnostic::error(Span::new(lo, self.pos), "unterminated string")
                        .with_label("the string starts here")
                        .with_help(format!("close it with {}", if triple { "three quotes" } else { "a quote" })),
                );
                break;
            }
            let c = self.peek_char();
            if c as u32 == q as u32 {
                if !triple {
                    self.pos += 1;
                    break;
                }
                if self.bytes.get(self.pos + 1) == Some(&q) && self.bytes.get(self.pos + 2) == Some(&q) {
                    self.pos += 3;
                    break;
                }
            }
            if c == '\\' {
                self.pos += 1;
                let e = self.peek_char();
                if self.pos < self.bytes.len() {
                    self.pos += e.len_utf8();
                }
                text.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    '0' => '\0',
                    other => other,
                });
                continue;
            }
            text.push(c);
            self.pos += c.len_utf8();
        }
        self.push(Tok::Str(text), lo, self.pos);
    }
}

fn unclosed(o: &Open) -> Diagnostic {
    let close = match o.ch {
        '(' => ')',
        '[' => ']',
        _ => '}',
    };
    Diagnostic::error(o.span, format!("unclosed `{}`", o.ch))
        .with_label("opened here and never closed")
        .with_help(format!("add the matching `{close}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        let mut d = vec![];
        let t = lex(s, &mut d);
        assert!(d.is_empty(), "{d:?}");
        t.into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn indentation_and_joined_lines() {
        let t = toks("def f(a,\n      b):\n    x = 1\n\n    # c\n    y = x // 2\nz = 3\n");
        let n = |s: &str| Tok::Name(s.into());
        assert_eq!(
            t,
            vec![
                n("def"),
                n("f"),
                Tok::Op("("),
                n("a"),
                Tok::Op(","),
                n("b"),
                Tok::Op(")"),
                Tok::Op(":"),
                Tok::Newline,
                Tok::Indent,
                n("x"),
                Tok::Op("="),
                Tok::Int(1),
                Tok::Newline,
                n("y"),
                Tok::Op("="),
                n("x"),
                Tok::Op("//"),
                Tok::Int(2),
                Tok::Newline,
                Tok::Dedent,
                n("z"),
                Tok::Op("="),
                Tok::Int(3),
                Tok::Newline,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn numbers_and_strings() {
        let t = toks("1.5e-3 0x10 'a\\'b' \"float32\" 1_000");
        assert_eq!(
            t[..5],
            [Tok::Float(1.5e-3), Tok::Int(16), Tok::Str("a'b".into()), Tok::Str("float32".into()), Tok::Int(1000)]
        );
    }

    #[test]
    fn unclosed_bracket_recovers_at_next_statement() {
        let mut d = vec![];
        let t = lex("x = f(1,\ny = 2\n", &mut d);
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("unclosed `(`"));
        assert!(t.iter().filter(|t| t.tok == Tok::Newline).count() >= 2);
    }
}
