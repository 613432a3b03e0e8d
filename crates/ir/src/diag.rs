//! Diagnostics: every user error is data (severity, message, labelled spans,
//! notes, a fix) and is rendered with file:line:col, the source line and a caret.

use crate::span::Span;
use codespan_reporting::diagnostic::{Diagnostic as CsDiag, Label as CsLabel};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::Buffer};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Note,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One diagnostic. `labels[0]` is the primary location.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
    /// How to fix it, when there is a fix.
    pub help: Option<String>,
    /// A bug in tirx, not in the user's kernel (exit code 2, never 1).
    pub internal: bool,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Error, span, message)
    }
    pub fn warning(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Warning, span, message)
    }
    /// Something the user should know that is neither wrong nor suspicious
    /// (a decision lowering made for them).
    pub fn note(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic::new(Severity::Note, span, message)
    }
    /// An error that is tirx's bug, located at the construct being lowered.
    pub fn internal(span: Span, message: impl Into<String>) -> Diagnostic {
        let mut d = Diagnostic::new(Severity::Error, span, format!("internal error: {}", message.into()))
            .with_note("this is a bug in tirx, not in the kernel; please report it with the script");
        d.internal = true;
        d
    }
    fn new(severity: Severity, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity,
            message: message.into(),
            labels: vec![Label { span, message: String::new() }],
            notes: vec![],
            help: None,
            internal: false,
        }
    }
    /// Text under the caret of the primary label.
    pub fn with_label(mut self, message: impl Into<String>) -> Diagnostic {
        if let Some(l) = self.labels.first_mut() {
            l.message = message.into();
        }
        self
    }
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: message.into() });
        self
    }
    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
    pub fn span(&self) -> Span {
        self.labels.first().map(|l| l.span).unwrap_or_default()
    }
}

/// 1-based (line, column) of a byte offset; columns count characters.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders diagnostics rustc-style: `error: msg`, ` --> file:line:col`, the line, carets.
pub fn render(diags: &[Diagnostic], file_name: &str, source: &str, color: bool) -> String {
    let file = SimpleFile::new(file_name, source);
    let mut buf = if color { Buffer::ansi() } else { Buffer::no_color() };
    let config = term::Config::default();
    for d in diags {
        let cs = to_codespan(d, source.len());
        // Rendering into a memory buffer cannot fail for in-range spans (clamped above).
        let _ = term::emit_to_write_style(&mut buf, &config, &file, &cs);
    }
    String::from_utf8_lossy(buf.as_slice()).into_owned()
}

fn to_codespan(d: &Diagnostic, len: usize) -> CsDiag<()> {
    let sev = match d.severity {
        Severity::Error => CsDiag::error(),
        Severity::Warning => CsDiag::warning(),
        Severity::Note => CsDiag::note(),
    };
    let clamp = |s: Span| {
        let lo = (s.lo as usize).min(len);
        lo..(s.hi as usize).clamp(lo, len)
    };
    let labels = d
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let lab = if i == 0 { CsLabel::primary((), clamp(l.span)) } else { CsLabel::secondary((), clamp(l.span)) };
            lab.with_message(l.message.clone())
        })
        .collect();
    let mut notes = d.notes.clone();
    if let Some(h) = &d.help {
        notes.push(format!("help: {h}"));
    }
    sev.with_message(d.message.clone()).with_labels(labels).with_notes(notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_location_line_and_caret() {
        let src = "a = 1\nb = foo(2)\n";
        let d = Diagnostic::error(Span::new(10, 13), "unknown name `foo`")
            .with_label("not defined")
            .with_help("did you mean `floor`?");
        let out = render(&[d], "k.py", src, false);
        assert!(out.contains("k.py:2:5"), "{out}");
        assert!(out.contains("b = foo(2)"), "{out}");
        assert!(out.contains("^^^"), "{out}");
        assert!(out.contains("help: did you mean"), "{out}");
        assert_eq!(line_col(src, 10), (2, 5));
    }

    #[test]
    fn renders_spans_past_the_end_or_inside_a_character() {
        let src = "x = \"é\"\n";
        for span in [Span::new(6, 7), Span::new(5, 6), Span::new(3, 400), Span::new(400, 500)] {
            let out = render(&[Diagnostic::error(span, "here")], "k.py", src, false);
            assert!(out.contains("error: here"), "{span:?}: {out}");
        }
    }
}
