//! The layering inside `crates/ir/src` (ARCHITECTURE.md): the script-level data — HIR, the
//! tile-op table, the scope-id closure and the shared vocabulary — never imports the LIR, which
//! is lowered from them (it may name their types, never the other way round). Read as text:
//! any `crate::lir` or `super::lir` path outside comments.

use std::path::Path;

/// The modules above the LIR.
const ABOVE_LIR: [&str; 4] = ["hir.rs", "op.rs", "scope_ids.rs", "vocab.rs"];

#[test]
fn hir_and_the_op_table_never_import_the_lir() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in ABOVE_LIR {
        let text = std::fs::read_to_string(src.join(file)).expect("source file");
        let offending: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| {
                let code = line.split("//").next().unwrap_or("");
                code.contains("crate::lir") || code.contains("super::lir")
            })
            .map(|(i, line)| (i + 1, line.trim()))
            .collect();
        assert!(offending.is_empty(), "{file} imports the LIR: {offending:?}");
    }
}
