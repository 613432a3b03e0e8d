//! What a simulation reports: errors (the GPU would fault, race or hang),
//! warnings (suspicious but defined), and how threads are named in both.

use serde::Serialize;
use std::fmt;
use tirx_ir::{Diagnostic, Span};

/// The class of a simulation error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SimErrorKind {
    /// An element index outside its buffer.
    OutOfBounds,
    /// Two threads (or CTAs) touch the same element without ordering, at least one writing.
    DataRace,
    /// A vector / matrix access whose byte address is not a multiple of its width.
    Misaligned,
    /// A barrier not reached by every thread it waits for.
    BarrierDivergence,
    /// A warp-collective instruction not executed by exactly the lanes it needs
    /// (all 32 for ldmatrix/stmatrix, the member mask for a shuffle), or reading a lane outside them.
    PartialWarp,
    /// Threads blocked on mbarrier phases that can never complete.
    Deadlock,
    /// A `cp.async` misused: a bad source size, or a thread exiting with copies not committed or not waited for.
    AsyncCopy,
    /// An mbarrier misused: not initialised, a bad count or parity, more arrivals than its count.
    Mbarrier,
    /// A wgmma misused: its accumulator or shared inputs accessed before the wait that
    /// covers it, a missing `wgmma.fence` or `fence.proxy.async`, an exit before the wait.
    Wgmma,
    /// Integer division or remainder by zero.
    DivisionByZero,
    /// A parameter buffer of the wrong size, a missing, extra or mistyped scalar argument.
    BadArgument,
    /// Scalar arguments the kernel cannot launch with: a failed launch check
    /// (`T.assume`, a region bound), a grid or buffer size out of range.
    InvalidLaunch,
    /// The kernel exceeds a hardware limit (threads per CTA, shared memory).
    ResourceLimit,
    /// The LIR itself is malformed (a lowering bug): bad ids, types, widths.
    InvalidKernel,
}

impl SimErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            SimErrorKind::OutOfBounds => "out-of-bounds access",
            SimErrorKind::DataRace => "data race",
            SimErrorKind::Misaligned => "misaligned access",
            SimErrorKind::BarrierDivergence => "barrier divergence",
            SimErrorKind::PartialWarp => "partial-warp collective",
            SimErrorKind::Deadlock => "deadlock",
            SimErrorKind::AsyncCopy => "async copy misuse",
            SimErrorKind::Mbarrier => "mbarrier misuse",
            SimErrorKind::Wgmma => "wgmma misuse",
            SimErrorKind::DivisionByZero => "division by zero",
            SimErrorKind::BadArgument => "bad argument",
            SimErrorKind::InvalidLaunch => "invalid launch",
            SimErrorKind::ResourceLimit => "resource limit",
            SimErrorKind::InvalidKernel => "invalid kernel",
        }
    }
}

/// A simulation error: `message` is the full sentence (buffer, element, threads);
/// `span` the statement that did it; `labels` further locations (the other side of a race).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimError {
    pub kind: SimErrorKind,
    pub message: String,
    pub span: Span,
    pub labels: Vec<(Span, String)>,
    pub help: Option<String>,
    /// What the kernel printed (`T.cuda.printf`) before the error ([`SimError::printed`]).
    /// Boxed: one pointer keeps every `Result<_, SimError>` small (a bare `Vec` would
    /// add three words to each error, which most runs never fill).
    #[allow(clippy::box_collection)]
    pub(crate) printed: Option<Box<Vec<String>>>,
}

impl SimError {
    pub(crate) fn new(kind: SimErrorKind, span: Span, message: impl Into<String>) -> SimError {
        SimError { kind, message: message.into(), span, labels: vec![], help: None, printed: None }
    }
    /// What the kernel printed (`T.cuda.printf`) before the error, in thread order.
    pub fn printed(&self) -> &[String] {
        self.printed.as_deref().map_or(&[], |v| v.as_slice())
    }
    pub(crate) fn label(mut self, span: Span, msg: impl Into<String>) -> SimError {
        self.labels.push((span, msg.into()));
        self
    }
    pub(crate) fn help(mut self, h: impl Into<String>) -> SimError {
        self.help = Some(h.into());
        self
    }
    /// The error as a diagnostic for `tirx_ir::diag::render`.
    pub fn to_diagnostic(&self) -> Diagnostic {
        let mut d = Diagnostic::error(self.span, format!("{}: {}", self.kind.name(), self.message));
        for (s, m) in &self.labels {
            d = d.with_secondary(*s, m.clone());
        }
        if let Some(h) = &self.help {
            d = d.with_help(h.clone());
        }
        d
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)?;
        if let Some(h) = &self.help {
            write!(f, " (help: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimError {}

/// Something defined but suspicious, reported once per statement and buffer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimWarning {
    pub span: Span,
    pub message: String,
    /// How many times it happened (across threads and CTAs).
    pub count: u64,
}

impl SimWarning {
    pub fn to_diagnostic(&self) -> Diagnostic {
        let times = if self.count > 1 { format!(" ({} times)", self.count) } else { String::new() };
        Diagnostic::warning(self.span, format!("{}{times}", self.message))
    }
}

impl fmt::Display for SimWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} times)", self.message, self.count)
    }
}

/// Names a thread the way users think of it: linear id (and threadIdx for 2-D/3-D
/// blocks), warp/lane, CTA.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pub tid: u32,
    pub block: [u32; 3],
    pub cta: [u32; 3],
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [bx, by, _] = self.block;
        write!(f, "thread {}", self.tid)?;
        if self.block[1] > 1 || self.block[2] > 1 {
            write!(f, " = threadIdx ({}, {}, {})", self.tid % bx, (self.tid / bx) % by, self.tid / (bx * by))?;
        }
        let [cx, cy, cz] = self.cta;
        write!(f, " (warp {}, lane {}) of CTA ({cx}, {cy}, {cz})", self.tid / 32, self.tid % 32)
    }
}

/// `0-15, 17, 20-31` for a sorted list of thread ids.
pub(crate) fn ranges(ids: &[u32]) -> String {
    let mut out: Vec<String> = vec![];
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j { ids[i].to_string() } else { format!("{}-{}", ids[i], ids[j]) });
        i = j + 1;
    }
    out.join(", ")
}
