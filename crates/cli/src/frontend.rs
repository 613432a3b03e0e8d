//! The shared front end of every command that takes a kernel script: read the
//! file, parse and check it, lower it, and either return the result or print
//! every diagnostic (`file:line:col`, source line, caret, help) and fail.
use crate::exit::Failure;
use std::io::IsTerminal;
use tirx_ir::hir::Kernel;
use tirx_ir::lir::LKernel;
use tirx_ir::Diagnostic;

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

/// HIR → LIR through the default CUDA lowering. Warnings are printed to
/// stderr; errors are printed and reported as [`Failure::Reported`].
pub fn lower(kernel: &Kernel, src: &Source) -> Result<LKernel, Failure> {
    match tirx_lower::lower_kernel(kernel, &tirx_lower::LowerOptions::default()) {
        Ok(l) => {
            eprint_diags(&l.warnings, src);
            Ok(l.lir)
        }
        Err(diags) => {
            eprint_diags(&diags, src);
            Err(Failure::Reported)
        }
    }
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
