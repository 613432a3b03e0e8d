//! The text syntax: `Display` for layouts and [`parse_layout`].
//!
//! Accepted (spaces anywhere, `T.`/`Tx.` prefixes and `Axis.` before axis names allowed):
//! `S[(32, 8):(1@laneid, 1)]`, `S[(32, 8)]` and `S[8, 4]` (row-major extents),
//! `S[8:4]` (one iter), `S[()]` (empty shard), `+ R[2:4@warpid]` (replica),
//! `+ 5@warpid` / `- 5@warpid` / `+ 64` (offsets, summed per axis),
//! `TileLayout(...)` wrapper, `ComposeLayout(p, sw, at, TILE[, swizzle_inner=False])`.
//! A stride may also be a quoted axis name (`"laneid"` = `1@laneid`).
//!
//! Printed form: `S[(32, 8):(1@laneid, 1)] + R[2:4@warpid] + 5@warpid`, `@m`
//! elided, offsets sorted by axis name, `ComposeLayout(3, 3, 3, S[(8, 64):(64, 1)])`.
//! Printing then parsing gives back the identical structure. Unlike the
//! reference, extent/stride count mismatches, a second `S[...]` and unknown
//! axis names are errors (pitfalls 6, 21).

use crate::axis::Axis;
use crate::tile::{ComposeLayout, Iter, Layout, Swizzle, TileLayout};
use std::fmt;

/// A syntax error: `offset` is the byte offset of the offending character.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutParseError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for LayoutParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for LayoutParseError {}

impl LayoutParseError {
    /// The message, the source line and a caret under the offending character.
    pub fn render(&self, src: &str) -> String {
        let at = self.offset.min(src.len());
        let col = src.get(..at).map_or(at, |p| p.chars().count());
        format!("error: {}\n  {}\n  {}^", self.message, src, " ".repeat(col))
    }
}

// ---------------------------------------------------------------- printing

fn fmt_stride(f: &mut fmt::Formatter<'_>, it: &Iter) -> fmt::Result {
    if it.axis == Axis::M {
        write!(f, "{}", it.stride)
    } else {
        write!(f, "{}@{}", it.stride, it.axis)
    }
}

/// `e:s` for one iter, `(e0, e1):(s0, s1)` otherwise, `()` when empty.
fn fmt_iters(f: &mut fmt::Formatter<'_>, iters: &[Iter]) -> fmt::Result {
    match iters {
        [] => f.write_str("()"),
        [one] => {
            write!(f, "{}:", one.extent)?;
            fmt_stride(f, one)
        }
        _ => {
            f.write_str("(")?;
            for (i, it) in iters.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{}", it.extent)?;
            }
            f.write_str("):(")?;
            for (i, it) in iters.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                fmt_stride(f, it)?;
            }
            f.write_str(")")
        }
    }
}

impl fmt::Display for TileLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        if !self.shard.is_empty() || (self.replica.is_empty() && self.offset.is_empty()) {
            f.write_str("S[")?;
            fmt_iters(f, &self.shard)?;
            f.write_str("]")?;
            first = false;
        }
        if !self.replica.is_empty() {
            f.write_str(if first { "R[" } else { " + R[" })?;
            fmt_iters(f, &self.replica)?;
            f.write_str("]")?;
            first = false;
        }
        for (&axis, &v) in &self.offset {
            let magnitude = v.unsigned_abs();
            match (first, v < 0) {
                (true, true) => write!(f, "-{magnitude}")?,
                (true, false) => write!(f, "{magnitude}")?,
                (false, true) => write!(f, " - {magnitude}")?,
                (false, false) => write!(f, " + {magnitude}")?,
            }
            if axis != Axis::M {
                write!(f, "@{axis}")?;
            }
            first = false;
        }
        Ok(())
    }
}

impl fmt::Display for ComposeLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.swizzle;
        write!(f, "ComposeLayout({}, {}, {}, {}", s.per_element, s.swizzle_len, s.atom_len, self.tile)?;
        if !s.inner {
            f.write_str(", swizzle_inner=False")?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Tile(t) => t.fmt(f),
            Layout::Compose(c) => c.fmt(f),
        }
    }
}

// ---------------------------------------------------------------- parsing

/// Parses a layout expression (see the module doc for the accepted forms).
pub fn parse_layout(src: &str) -> Result<Layout, LayoutParseError> {
    let mut p = Parser { src, pos: 0 };
    let layout = p.layout()?;
    p.skip_ws();
    if p.pos < src.len() {
        return Err(p.error_here("expected `+`, `-` or the end of the layout"));
    }
    Ok(layout)
}

type PResult<T> = Result<T, LayoutParseError>;

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

/// One extent-or-stride list entry as written.
struct Stride {
    value: i64,
    axis: Axis,
}

impl<'a> Parser<'a> {
    fn error_at(&self, offset: usize, message: impl Into<String>) -> LayoutParseError {
        LayoutParseError { offset, message: message.into() }
    }

    fn error_here(&self, message: &str) -> LayoutParseError {
        let found = match self.peek() {
            Some(c) => format!("found `{c}`"),
            None => "found the end of the input".to_string(),
        };
        self.error_at(self.pos, format!("{message}, {found}"))
    }

    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_whitespace()) {
            self.pos += c.len_utf8();
        }
    }

    /// Consumes `c` (after whitespace) if it is next.
    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, what: &str) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error_here(&format!("expected `{c}` {what}")))
        }
    }

    /// A dotted identifier (`T.S`, `Axis.laneid`) starting here, without consuming it.
    fn peek_ident(&mut self) -> Option<(usize, &'a str)> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let first = rest.chars().next()?;
        if !(first.is_ascii_alphabetic() || first == '_') {
            return None;
        }
        let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).unwrap_or(rest.len());
        Some((self.pos, &rest[..len]))
    }

    fn layout(&mut self) -> PResult<Layout> {
        if let Some((start, word)) = self.peek_ident() {
            if strip_module(word) == "ComposeLayout" {
                self.pos = start + word.len();
                return self.compose().map(Layout::Compose);
            }
        }
        self.sum().map(Layout::Tile)
    }

    fn compose(&mut self) -> PResult<ComposeLayout> {
        self.expect('(', "after `ComposeLayout`")?;
        let mut params = [0u32; 3];
        let params_at = self.pos;
        for (i, name) in ["per_element", "swizzle_len", "atom_len"].iter().enumerate() {
            self.skip_ws();
            let at = self.pos;
            let v = self.integer()?;
            params[i] = u32::try_from(v)
                .map_err(|_| self.error_at(at, format!("{name} must be a small non-negative integer")))?;
            self.expect(',', &format!("after {name}"))?;
        }
        let tile = self.sum()?;
        let mut inner = true;
        if self.eat(',') {
            let Some((at, word)) = self.peek_ident() else {
                return Err(self.error_here("expected `swizzle_inner=True|False`"));
            };
            if word != "swizzle_inner" {
                return Err(self.error_at(at, format!("unknown argument `{word}`; expected `swizzle_inner`")));
            }
            self.pos = at + word.len();
            self.expect('=', "after `swizzle_inner`")?;
            inner = match self.peek_ident() {
                Some((at, "True")) => {
                    self.pos = at + 4;
                    true
                }
                Some((at, "False")) => {
                    self.pos = at + 5;
                    false
                }
                _ => return Err(self.error_here("expected `True` or `False`")),
            };
        }
        self.expect(')', "to close `ComposeLayout(`")?;
        let swizzle = Swizzle::new(params[0], params[1], params[2], inner)
            .map_err(|e| self.error_at(params_at, e.to_string()))?;
        Ok(ComposeLayout { swizzle, tile })
    }

    /// `term (+|- term)*`, merged into one TileLayout.
    fn sum(&mut self) -> PResult<TileLayout> {
        let mut acc = Acc::default();
        self.term(&mut acc, false)?;
        loop {
            self.skip_ws();
            let negate = match self.peek() {
                Some('+') => false,
                Some('-') => true,
                _ => break,
            };
            self.pos += 1;
            self.term(&mut acc, negate)?;
        }
        Ok(acc.finish())
    }

    fn term(&mut self, acc: &mut Acc, negate: bool) -> PResult<()> {
        self.skip_ws();
        let start = self.pos;
        if let Some((at, word)) = self.peek_ident() {
            let kind = strip_module(word);
            let after = at + word.len();
            match kind {
                "S" | "R" | "TileLayout" if negate => {
                    return Err(self.error_at(at, format!("`{kind}` cannot be subtracted; only offsets can be negative")));
                }
                "S" => {
                    self.pos = after;
                    let iters = self.spec()?;
                    if acc.shard.is_some() {
                        return Err(self.error_at(at, "a layout has one `S[...]` shard; found a second one"));
                    }
                    acc.shard = Some(iters);
                    return Ok(());
                }
                "R" => {
                    self.pos = after;
                    let iters = self.spec()?;
                    acc.replica.extend(iters);
                    return Ok(());
                }
                "TileLayout" => {
                    self.pos = after;
                    self.expect('(', "after `TileLayout`")?;
                    let inner = self.sum()?;
                    self.expect(')', "to close `TileLayout(`")?;
                    return acc.merge(inner).map_err(|m| self.error_at(at, m));
                }
                _ => {
                    return Err(self.error_at(
                        at,
                        format!("unknown term `{word}`; expected `S[...]`, `R[...]`, `TileLayout(...)` or an offset like `5@warpid`"),
                    ))
                }
            }
        }
        let offset = self.stride(negate).map_err(|e| {
            if e.offset == start {
                self.error_here("expected `S[...]`, `R[...]` or an offset like `5@warpid`")
            } else {
                e
            }
        })?;
        acc.add_offset(offset.axis, offset.value).map_err(|m| self.error_at(start, m))
    }

    /// `[extents (: strides)?]` after `S` / `R`.
    fn spec(&mut self) -> PResult<Vec<Iter>> {
        self.expect('[', "to open the iter list")?;
        self.skip_ws();
        let ext_at = self.pos;
        let (extents, parenthesized) = self.extent_list()?;
        let iters = if self.eat(':') {
            if extents.len() > 1 && !parenthesized {
                return Err(
                    self.error_at(ext_at, "parenthesize several extents when giving strides: `S[(8, 4):(4, 1)]`")
                );
            }
            self.skip_ws();
            let str_at = self.pos;
            let strides = self.stride_list()?;
            if strides.len() != extents.len() {
                return Err(self.error_at(
                    str_at,
                    format!("{} extent(s) but {} stride(s); give one stride per extent", extents.len(), strides.len()),
                ));
            }
            extents.iter().zip(strides).map(|(&e, s)| Iter::new(e, s.value, s.axis)).collect()
        } else {
            let t = TileLayout::row_major(&extents);
            if t.size(None).is_err() {
                return Err(self.error_at(ext_at, "the extents multiply to more than a layout can hold"));
            }
            t.shard
        };
        self.expect(']', "to close the iter list")?;
        Ok(iters)
    }

    /// `(e, ...)`, `()` or `e, e, ...`; returns the extents and whether they were parenthesized.
    fn extent_list(&mut self) -> PResult<(Vec<i64>, bool)> {
        let parenthesized = self.eat('(');
        let mut out = Vec::new();
        if parenthesized && self.eat(')') {
            return Ok((out, true));
        }
        loop {
            self.skip_ws();
            let at = self.pos;
            let e = self.integer()?;
            if e <= 0 {
                return Err(self.error_at(at, format!("extent {e} must be positive")));
            }
            out.push(e);
            if !self.eat(',') {
                break;
            }
            if parenthesized && self.eat(')') {
                return Ok((out, true)); // trailing comma
            }
        }
        if parenthesized {
            self.expect(')', "to close the extents")?;
        }
        Ok((out, parenthesized))
    }

    /// `(s, ...)`, `()` or one stride.
    fn stride_list(&mut self) -> PResult<Vec<Stride>> {
        if !self.eat('(') {
            return Ok(vec![self.stride(false)?]);
        }
        let mut out = Vec::new();
        if self.eat(')') {
            return Ok(out);
        }
        loop {
            out.push(self.stride(false)?);
            if !self.eat(',') {
                break;
            }
            if self.eat(')') {
                return Ok(out);
            }
        }
        self.expect(')', "to close the strides")?;
        Ok(out)
    }

    /// `v`, `v@axis` or a quoted axis name (stride 1); `negate` for a subtracted offset.
    fn stride(&mut self, negate: bool) -> PResult<Stride> {
        self.skip_ws();
        if matches!(self.peek(), Some('"' | '\'')) {
            return Ok(Stride { value: if negate { -1 } else { 1 }, axis: self.quoted_axis()? });
        }
        let value = self.signed_integer(negate)?;
        let axis = if self.eat('@') { self.axis()? } else { Axis::M };
        Ok(Stride { value, axis })
    }

    fn axis(&mut self) -> PResult<Axis> {
        self.skip_ws();
        if matches!(self.peek(), Some('"' | '\'')) {
            return self.quoted_axis();
        }
        let Some((at, word)) = self.peek_ident() else {
            return Err(self.error_here("expected an axis name after `@`"));
        };
        self.pos = at + word.len();
        let name = word.strip_prefix("T.").unwrap_or(word);
        let name = name.strip_prefix("Axis.").unwrap_or(name);
        lookup_axis(name).ok_or_else(|| self.error_at(at, unknown_axis(word)))
    }

    fn quoted_axis(&mut self) -> PResult<Axis> {
        let at = self.pos;
        let quote = self.peek().unwrap_or('"');
        let rest = &self.src[at + 1..];
        let Some(len) = rest.find(quote) else {
            return Err(self.error_at(at, "unterminated axis name string"));
        };
        let name = &rest[..len];
        self.pos = at + 1 + len + 1;
        lookup_axis(name).ok_or_else(|| self.error_at(at + 1, unknown_axis(name)))
    }

    /// An optionally signed decimal integer that fits `i64`.
    fn integer(&mut self) -> PResult<i64> {
        self.signed_integer(false)
    }

    /// As [`Parser::integer`], negated when `flip` (so `- 9223372036854775808` fits).
    fn signed_integer(&mut self, flip: bool) -> PResult<i64> {
        self.skip_ws();
        let start = self.pos;
        let negative = self.peek() == Some('-');
        if negative {
            self.pos += 1;
            self.skip_ws();
        }
        let digits_at = self.pos;
        let rest = &self.src[digits_at..];
        let len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if len == 0 {
            self.pos = start;
            return Err(self.error_here("expected an integer"));
        }
        self.pos = digits_at + len;
        let magnitude: i128 = rest[..len].parse().unwrap_or(i128::MAX);
        let value = if negative != flip { -magnitude } else { magnitude };
        i64::try_from(value).map_err(|_| self.error_at(start, "integer does not fit in 64 bits"))
    }
}

/// `T.S` / `Tx.S` → `S`.
fn strip_module(word: &str) -> &str {
    word.strip_prefix("T.").or_else(|| word.strip_prefix("Tx.")).unwrap_or(word)
}

fn lookup_axis(name: &str) -> Option<Axis> {
    Axis::from_name(name)
}

fn unknown_axis(name: &str) -> String {
    let valid: Vec<&str> = Axis::ALL.iter().map(|a| a.name()).collect();
    format!("unknown axis `{name}`; valid axes: {}", valid.join(", "))
}

/// The layout being assembled from `+`-joined terms.
#[derive(Default)]
struct Acc {
    shard: Option<Vec<Iter>>,
    replica: Vec<Iter>,
    offset: std::collections::BTreeMap<Axis, i64>,
}

impl Acc {
    fn add_offset(&mut self, axis: Axis, v: i64) -> Result<(), String> {
        let slot = self.offset.entry(axis).or_insert(0);
        *slot = slot.checked_add(v).ok_or("offsets on one axis add up past 64 bits")?;
        Ok(())
    }

    fn merge(&mut self, t: TileLayout) -> Result<(), String> {
        if !t.shard.is_empty() {
            if self.shard.is_some() {
                return Err("a layout has one `S[...]` shard; found a second one".into());
            }
            self.shard = Some(t.shard);
        }
        self.replica.extend(t.replica);
        for (a, v) in t.offset {
            self.add_offset(a, v)?;
        }
        Ok(())
    }

    fn finish(self) -> TileLayout {
        TileLayout { shard: self.shard.unwrap_or_default(), replica: self.replica, offset: self.offset }
    }
}
