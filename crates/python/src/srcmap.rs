//! Where generated script text came from in the user's Python file.
//!
//! The Python front end evaluates a decorated function and writes a closure-free
//! script (`docs/python.md` §2); each piece of that text that stands for a node
//! of the user's source is an [`Entry`]. Diagnostics of the script, the lowering
//! and the simulator carry spans into the generated text; [`SourceMap::remap`]
//! moves them into the user's file so that they are rendered there, with the
//! user's line and a caret under the operand they wrote.

use tirx_ir::{Diagnostic, Span};

/// `gen` (bytes of the generated script) stands for `orig` (bytes of the user's file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub gen: Span,
    pub orig: Span,
    /// The generated text is the user's text, byte for byte: sub-spans map by offset.
    pub exact: bool,
}

/// The entries of one generated script.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    entries: Vec<Entry>,
}

impl SourceMap {
    pub fn new(entries: Vec<Entry>) -> SourceMap {
        SourceMap { entries }
    }

    /// The user's span for generated span `s`: through the smallest entry that
    /// contains it (offset by offset when that entry is exact), else the smallest
    /// that contains its start; an empty span at 0 when nothing does.
    pub fn map(&self, s: Span) -> Span {
        let within = |e: &&Entry| e.gen.lo <= s.lo && s.hi <= e.gen.hi;
        let at_start = |e: &&Entry| e.gen.lo <= s.lo && s.lo < e.gen.hi.max(e.gen.lo + 1);
        let smallest = |it: &mut dyn Iterator<Item = &Entry>| it.min_by_key(|e| e.gen.hi - e.gen.lo).copied();
        let best = smallest(&mut self.entries.iter().filter(within))
            .or_else(|| smallest(&mut self.entries.iter().filter(at_start)));
        match best {
            Some(e) if e.exact => {
                let lo = e.orig.lo + (s.lo - e.gen.lo);
                Span { lo, hi: (lo + (s.hi - s.lo)).min(e.orig.hi).max(lo) }
            }
            Some(e) => e.orig,
            None => Span::default(),
        }
    }

    /// `d` with every label moved into the user's file.
    pub fn remap(&self, mut d: Diagnostic) -> Diagnostic {
        for l in &mut d.labels {
            l.span = self.map(l.span);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(g: (usize, usize), o: (usize, usize), exact: bool) -> Entry {
        Entry { gen: Span::new(g.0, g.1), orig: Span::new(o.0, o.1), exact }
    }

    #[test]
    fn the_smallest_entry_wins_and_exact_entries_map_offsets() {
        let m = SourceMap::new(vec![e((0, 100), (1000, 1050), false), e((10, 20), (2000, 2010), true)]);
        assert_eq!(m.map(Span::new(12, 15)), Span::new(2002, 2005));
        assert_eq!(m.map(Span::new(30, 40)), Span::new(1000, 1050));
        // Crosses the inner entry's end: the outer one contains it.
        assert_eq!(m.map(Span::new(15, 25)), Span::new(1000, 1050));
        assert_eq!(m.map(Span::new(200, 210)), Span::default());
    }

    #[test]
    fn a_span_that_no_entry_contains_maps_through_its_start() {
        let m = SourceMap::new(vec![e((10, 20), (500, 505), false)]);
        assert_eq!(m.map(Span::new(15, 40)), Span::new(500, 505));
    }
}
