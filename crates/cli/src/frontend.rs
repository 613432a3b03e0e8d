//! The shared front end of every command that takes a kernel script: read the
//! file, parse and check it, and either return the HIR or print every
//! diagnostic (`file:line:col`, source line, caret, help) and fail.
use crate::exit::Failure;
use std::io::IsTerminal;
use tirx_ir::hir::Kernel;

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
    let color = std::io::stderr().is_terminal();
    match tirx_script::parse_kernel_with_warnings(&name, &text) {
        Ok((kernel, warnings)) => {
            if !warnings.is_empty() {
                eprint!("{}", tirx_ir::diag::render(&warnings, &name, &text, color));
            }
            Ok((kernel, Source { name, text }))
        }
        Err(diags) => {
            eprint!("{}", tirx_ir::diag::render(&diags, &name, &text, color));
            let errors = diags.iter().filter(|d| d.is_error()).count();
            eprintln!("error: `{name}` has {errors} error{}", if errors == 1 { "" } else { "s" });
            Err(Failure::Reported)
        }
    }
}
