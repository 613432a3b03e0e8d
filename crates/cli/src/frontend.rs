//! The shared front end of every command that takes a kernel script: read the
//! file, parse and check it, lower it, and either return the result or print
//! every diagnostic (`file:line:col`, source line, caret, help) and fail.
use crate::exit::Failure;
use crate::out::errln;
use std::io::IsTerminal;
use tirx_ir::hir::Kernel;
use tirx_ir::lir::LKernel;
use tirx_ir::{Arch, Diagnostic};

pub struct Source {
    pub name: String,
    pub text: String,
}

/// Reads and checks `path`. Warnings are printed to stderr; errors are
/// printed and reported as [`Failure::Reported`] (exit 1).
pub fn load_kernel(path: &std::path::Path) -> Result<(Kernel, Source), Failure> {
    let name = path.display().to_string();
    let bytes = crate::input::read_file(path, crate::input::MAX_SCRIPT_BYTES, "kernel script")?;
    let text = String::from_utf8(bytes).map_err(|e| {
        Failure::User(format!(
            "error: `{name}` is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let src = Source { name, text };
    match tirx_script::parse_kernel_with_warnings(&src.name, &src.text) {
        Ok((kernel, warnings)) => {
            eprint_diags(&warnings, &src);
            Ok((kernel, src))
        }
        Err(diags) => {
            eprint_diags(&diags, &src);
            let stopped = diags.iter().any(|d| d.message.starts_with(tirx_script::STOPPED));
            let errors = diags.iter().filter(|d| d.is_error() && !d.message.starts_with(tirx_script::STOPPED)).count();
            if stopped {
                errln!("error: `{}` has at least {errors} errors (checking stopped there)", src.name);
            } else {
                errln!("error: `{}` has {errors} error{}", src.name, if errors == 1 { "" } else { "s" });
            }
            Err(Failure::Reported)
        }
    }
}

/// HIR → LIR through the CUDA lowering for `arch`. Warnings and notes are printed to
/// stderr; errors are printed and reported as [`Failure::Reported`] (exit 1),
/// or exit 2 when one of them is an internal error.
pub fn lower(kernel: &Kernel, src: &Source, arch: Arch) -> Result<LKernel, Failure> {
    lower_with(kernel, src, &tirx_lower::LowerOptions::for_arch(arch))
}

/// [`lower`] with explicit options.
pub fn lower_with(kernel: &Kernel, src: &Source, opts: &tirx_lower::LowerOptions) -> Result<LKernel, Failure> {
    match tirx_lower::lower_kernel(kernel, opts) {
        Ok(l) => {
            eprint_diags(&l.warnings, src);
            eprint_diags(&l.notes, src);
            Ok(l.lir)
        }
        Err(diags) => Err(report_errors(&diags, src)),
    }
}

/// Prints `diags` and says how the command fails: exit 2 if any is a bug in tirx, else exit 1.
pub fn report_errors(diags: &[Diagnostic], src: &Source) -> Failure {
    eprint_diags(diags, src);
    if diags.iter().any(|d| d.internal) {
        Failure::Internal("see the diagnostics above".into())
    } else {
        Failure::Reported
    }
}

/// Refuses (exit 1) a simulation of `lir` that would take more host memory
/// than `opts` allow, before any buffer is allocated; the diagnostic points at
/// the declaration of the buffer that takes the most (found in `kernel` by name).
pub fn check_sim_memory(
    kernel: &Kernel,
    lir: &LKernel,
    src: &Source,
    opts: &tirx_sim::SimOptions,
) -> Result<(), Failure> {
    let Err(mut e) = tirx_sim::check_memory(lir, opts) else { return Ok(()) };
    let used = tirx_sim::memory_use(lir, opts);
    let mut label = String::new();
    if let Some(big) = used.largest() {
        let name = &lir.buf(big.buf).name;
        if let Some(b) = kernel.buffers.iter().find(|b| &b.name == name) {
            e.span = b.span;
            label = format!("`{name}` takes {} in the simulator", tirx_sim::bytes_text(big.total()));
        }
    }
    eprint_diags(&[e.to_diagnostic().with_label(label)], src);
    Err(Failure::Reported)
}

/// The `--arch` option every lowering command takes.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct ArchArg {
    /// The target GPU architecture (sm_90a, sm_80, ...): variants and instructions it lacks are not used.
    #[arg(long, default_value_t = Arch::DEFAULT, value_name = "SM")]
    pub arch: Arch,
}

/// Most diagnostics rendered for one file; the rest are counted ("and K more").
pub const MAX_SHOWN_DIAGS: usize = 50;

/// Renders `diags` (nothing when empty) on stderr at their spans in `src`;
/// coloured on a terminal unless `NO_COLOR` is set. At most
/// [`MAX_SHOWN_DIAGS`] are rendered, then a line counting the others.
pub fn eprint_diags(diags: &[Diagnostic], src: &Source) {
    if diags.is_empty() {
        return;
    }
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let shown = &diags[..diags.len().min(MAX_SHOWN_DIAGS)];
    // Runs of diagnostics on ordinary lines render with their source lines; one
    // on a very long line (a 16 MiB one-line file) renders without it, so that
    // 50 of them are not 50 copies of the line.
    let mut run_start = 0;
    for (i, d) in shown.iter().enumerate() {
        if let Some(len) = long_line(d, &src.text) {
            crate::out::err(&tirx_ir::diag::render(&shown[run_start..i], &src.name, &src.text, color));
            crate::out::err(&plain(d, src, len));
            run_start = i + 1;
        }
    }
    crate::out::err(&tirx_ir::diag::render(&shown[run_start..], &src.name, &src.text, color));
    if let Some(more) = hidden_summary(&diags[shown.len()..]) {
        errln!("{more}");
    }
}

/// Longest source line a rendered diagnostic shows.
const MAX_SHOWN_LINE: usize = 4096;

/// The length of the longest line a label of `d` touches, when it is over [`MAX_SHOWN_LINE`].
fn long_line(d: &Diagnostic, text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let longest = d
        .labels
        .iter()
        .flat_map(|l| [l.span.lo as usize, l.span.hi as usize])
        .map(|at| {
            let at = at.min(bytes.len());
            let start = bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let end = bytes[at..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| at + i);
            end - start
        })
        .max()?;
    (longest > MAX_SHOWN_LINE).then_some(longest)
}

/// `d` as `error: message`, its location and notes, without the source line (which is `len` bytes).
fn plain(d: &Diagnostic, src: &Source, len: usize) -> String {
    let sev = match d.severity {
        tirx_ir::diag::Severity::Error => "error",
        tirx_ir::diag::Severity::Warning => "warning",
        tirx_ir::diag::Severity::Note => "note",
    };
    let (line, col) = tirx_ir::diag::line_col(&src.text, d.span().lo as usize);
    let mut out =
        format!("{sev}: {}\n  --> {}:{line}:{col} (the line is {len} bytes long: not shown)\n", d.message, src.name);
    for l in d.labels.iter().filter(|l| !l.message.is_empty()) {
        let (line, col) = tirx_ir::diag::line_col(&src.text, l.span.lo as usize);
        out.push_str(&format!("  {line}:{col}: {}\n", l.message));
    }
    for n in &d.notes {
        out.push_str(&format!("  = {n}\n"));
    }
    if let Some(h) = &d.help {
        out.push_str(&format!("  = help: {h}\n"));
    }
    out.push('\n');
    out
}

/// `error: and 3 more errors and 1 more warning in this file (not shown)`, or `None` when nothing is hidden.
fn hidden_summary(hidden: &[Diagnostic]) -> Option<String> {
    if hidden.is_empty() {
        return None;
    }
    let errors = hidden.iter().filter(|d| d.is_error()).count();
    let others = hidden.len() - errors;
    let count = |n: usize, what: &str| format!("{n} more {what}{}", if n == 1 { "" } else { "s" });
    let parts: Vec<String> =
        [(errors, "error"), (others, "warning")].iter().filter(|(n, _)| *n > 0).map(|(n, w)| count(*n, w)).collect();
    let sev = if errors > 0 { "error" } else { "warning" };
    Some(format!(
        "{sev}: and {} (not shown: only the first {MAX_SHOWN_DIAGS} are; fix those first)",
        parts.join(" and ")
    ))
}
