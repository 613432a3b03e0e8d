//! The shared front end of every command that takes a kernel script: read the
//! file, parse and check it, lower it, and either return the result or print
//! every diagnostic (`file:line:col`, source line, caret, help) and fail.
use crate::exit::Failure;
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
    let bytes = std::fs::read(path).map_err(|e| Failure::User(format!("error: cannot read `{name}`: {e}")))?;
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
            let errors = diags.iter().filter(|d| d.is_error()).count();
            eprintln!("error: `{}` has {errors} error{}", src.name, if errors == 1 { "" } else { "s" });
            Err(Failure::Reported)
        }
    }
}

/// HIR → LIR through the CUDA lowering for `arch`. Warnings are printed to
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

/// Renders `diags` (nothing when empty) on stderr at their spans in `src`;
/// coloured on a terminal unless `NO_COLOR` is set.
pub fn eprint_diags(diags: &[Diagnostic], src: &Source) {
    if diags.is_empty() {
        return;
    }
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    eprint!("{}", tirx_ir::diag::render(diags, &src.name, &src.text, color));
}
