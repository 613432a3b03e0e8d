//! Parse + check of each example (lex, parse, evaluate, build HIR, scope-id
//! inference), and printing. Run: `cargo bench -p tirx-script --bench parse`.

use std::path::PathBuf;

fn main() {
    divan::main();
}

const EXAMPLES: [&str; 11] = [
    "copy_reg",
    "elementwise_reg",
    "copy_gmem_smem",
    "copy_fallback",
    "copy_ldstmatrix",
    "constructs_loops",
    "constructs_views",
    "constructs_swizzle",
    "constructs_scopes",
    "constructs_elementwise",
    "constructs_dispatch",
];

fn source(stem: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../examples/{stem}.py"));
    std::fs::read_to_string(p).expect("example exists")
}

#[divan::bench(args = EXAMPLES)]
fn parse_check(bencher: divan::Bencher, stem: &str) {
    let text = source(stem);
    bencher.bench(|| tirx_script::parse_kernel(stem, divan::black_box(&text)).is_ok());
}

#[divan::bench(args = EXAMPLES)]
fn print(bencher: divan::Bencher, stem: &str) {
    let k = tirx_script::parse_kernel(stem, &source(stem)).expect("example parses");
    bencher.bench(|| tirx_script::print_kernel(divan::black_box(&k)));
}
