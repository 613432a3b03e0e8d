//! A table of bad scripts: each must fail with the given message at the given
//! line:col (and, where there is a fix, the given help). The kernel preamble
//! is shared; `line` counts from the first line of the case's body.

use tirx_ir::diag::line_col;
use tirx_ir::Diagnostic;

const PREAMBLE: &str = "\
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid, tx, warpid

@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), \"float32\")
    B = T.match_buffer(B_ptr, (32, 8), \"float32\")
";
/// Lines in PREAMBLE.
const PRE: usize = 8;
const DEVICE: &str = "    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])\n";

struct Case {
    name: &'static str,
    /// Full source, or a kernel body appended to PREAMBLE (+ DEVICE line).
    src: Src,
    message: &'static str,
    /// 1-based line within the body (or file, for `Src::File`), and column.
    at: (usize, usize),
    help: Option<&'static str>,
}

enum Src {
    /// Body after the preamble and the device line.
    Body(&'static str),
    /// Body right after the preamble (no device line).
    Raw(&'static str),
    File(&'static str),
}

fn source(c: &Case) -> (String, usize) {
    match c.src {
        Src::Body(b) => (format!("{PREAMBLE}{DEVICE}{b}"), PRE + 1),
        Src::Raw(b) => (format!("{PREAMBLE}{b}"), PRE),
        Src::File(f) => (f.to_string(), 0),
    }
}

fn cases() -> Vec<Case> {
    use Src::*;
    let c = |name, src, message, at, help| Case { name, src, message, at, help };
    vec![
        c("unknown name", Body("    B[tid, 0] = AA[tid, 0]\n"), "unknown name `AA`", (1, 17), Some("did you mean `A`?")),
        c(
            "a 2-D id bound to one name",
            Raw("    T.device_entry(); blk = T.cta_id([2, 4]); tid = T.thread_id([32])\n    B[tid, 0] = T.float32(blk)\n"),
            "unknown name `blk`",
            (2, 27),
            Some("`blk = ...` bound an id of several dimensions as `blk_0`, `blk_1`, ...; use those, or bind one name per dimension (`x, y = T.cta_id([4, 8])`)"),
        ),
        c("unknown T attribute", Body("    T.cuda.cta_synk()\n"), "`T.cuda` has no attribute `cta_synk`", (1, 12), Some("did you mean `T.cuda.cta_sync`?")),
        c("unknown dtype constructor", Body("    B[tid, 0] = T.bfloat15(1.0)\n"), "`T` has no attribute `bfloat15`", (1, 19), Some("did you mean `T.bfloat16`?")),
        c("unknown tile op", Body("    Tx.warp.cpy(B[0:32, 0:8], A[0:32, 0:8])\n"), "`Tx.warp` has no attribute `cpy`", (1, 13), Some("did you mean `Tx.warp.copy`?")),
        c("unknown exec scope", Body("    Tx.warps.copy(B[0:32, 0:8], A[0:32, 0:8])\n"), "`Tx` has no attribute `warps`", (1, 8), Some("did you mean `Tx.warp`?")),
        c("reduction axis out of range", Body("    L = T.alloc_local((8,), \"float32\")\n    M = T.alloc_local((1,), \"float32\")\n    Tx.sum(M, L, axes=(1,))\n"), "bad `axes` for `sum`: axis 1 is out of range for a source region of 1 dims (valid: -1..1)", (3, 23), Some("name dims of the source region, e.g. `axes=-1` for the last")),
        c("reduction axes of the wrong kind", Body("    L = T.alloc_local((8,), \"float32\")\n    Tx.max(L[0:1], L, axes=\"x\")\n"), "`axes` of `max` must be an int or a tuple of ints (`axes=-1`, `axes=(0, 2)`), found a string", (2, 28), None),
        c("reduction destination shape", Body("    L = T.alloc_local((8, 4), \"float32\")\n    M = T.alloc_local((4,), \"float32\")\n    Tx.min(M, L, axes=1)\n"), "the destination region (4,) does not match the kept extents (8,) of the source (8, 4) reduced over axes [1]", (3, 12), None),
        c("reduction dtype mismatch", Body("    L = T.alloc_local((8,), \"float32\")\n    M = T.alloc_local((1,), \"float16\")\n    Tx.sum(M, L)\n"), "reduction dtype mismatch: `L` is float32 but `M` is float16", (3, 15), None),
        c("accum is a bool", Body("    L = T.alloc_local((8,), \"float32\")\n    Tx.sum(L[0:1], L, accum=1)\n"), "`accum` of `sum` must be `True` or `False`, found an int", (2, 29), None),
        c("unknown config key", Body("    Tx.copy(B[tid, 0:8], A[tid, 0:8], cach=\"nc\")\n"), "unknown config key `cach` for `copy`", (1, 39), Some("did you mean `cache`?")),
        c("config key of another family", Body("    Tx.copy(B[tid, 0:8], A[tid, 0:8], rounding_mode=\"rz\")\n"), "`rounding_mode` does not apply to `copy`", (1, 39), None),
        c("config value of the wrong kind", Body("    Tx.copy(B[tid, 0:8], A[tid, 0:8], prefetch_size=100)\n"), "`prefetch_size` expects 64, 128 or 256", (1, 53), Some("`prefetch_size` expects 64, 128 or 256")),
        c("unknown rounding mode", Body("    L = T.alloc_local((8,), \"float32\")\n    Tx.add(L, L, L, rounding_mode=\"rq\")\n"), "`rounding_mode` expects \"rn\", \"rz\", \"rm\" or \"rp\"", (2, 35), None),
        c(
            "copy dtype mismatch",
            Body("    H = T.alloc_buffer((32, 8), \"float16\", scope=\"shared\")\n    Tx.warp.copy(H[0:32, 0:8], A[0:32, 0:8])\n"),
            "copy dtype mismatch: `A` is float32 but `H` is float16",
            (2, 32),
            Some("Tx.cast"),
        ),
        c(
            "copy regions differ",
            Body("    Tx.warp.copy(B[0:32, 0:8], A[0:16, 0:8])\n"),
            "copy operands cover different regions: dst (32, 8) vs src (16, 8)",
            (1, 32),
            Some(".view("),
        ),
        c("region out of bounds", Body("    Tx.warp.copy(B[0:32, 0:8], A[0:40, 0:8])\n"), "region 0:40 is out of bounds for dimension 0 of `A` (extent 32)", (1, 34), None),
        c("open slice from a huge negative start", Body("    Tx.warp.copy(B[0:32, 0:8], A[-9223372036854775807:, 0:8])\n"), "is out of bounds for dimension 0 of `A` (extent 32)", (1, 34), None),
        c("int literal too wide for int8", Body("    x = T.int8(300)\n"), "integer 300 does not fit int8 (-128..=127)", (1, 9), Some("wider dtype")),
        c("int literal too wide for a uint8 element", Body("    I = T.alloc_buffer((1,), \"uint8\", scope=\"shared\")\n    I[0] = 256\n"), "integer 256 does not fit uint8 (0..=255)", (2, 12), Some("wider dtype")),
        c("index out of bounds", Body("    B[tid, 8] = 1.0\n"), "index 8 is out of bounds for dimension 1 of `B`", (1, 12), None),
        c(
            "thread-axis buffer indexed directly",
            Body("    R = T.alloc_buffer((32, 8), \"float32\", scope=\"local\", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))\n    R[tid, 0] = 1.0\n"),
            "cannot index `R` directly: its layout has thread axes (laneid)",
            (2, 5),
            Some("R_local = R.local()"),
        ),
        c(
            "shared kernel parameter",
            File("from tvm.script import tirx as T\n\n@T.prim_func\ndef k(s_ptr: T.handle):\n    S = T.match_buffer(s_ptr, (64, 64), \"bfloat16\", scope=\"shared\")\n"),
            "a kernel parameter in shared memory",
            (5, 59),
            Some("allocate the tile inside the kernel: `S = T.alloc_buffer(shape, dtype, scope=\"shared\")`, or drop `scope=` for a global argument"),
        ),
        c("missing thread extent", Raw("    T.device_entry(); T.cta_id([1])\n    T.cuda.cta_sync()\n"), "missing thread extent", (1, 23), Some("T.thread_id([128])")),
        c(
            "inconsistent scope-id extents",
            Raw("    T.device_entry(); T.warp_id([4]); T.lane_id([32]); T.thread_id([64])\n"),
            "inconsistent scope-id extents",
            (1, 56),
            None,
        ),
        c(
            "deferred extent cannot be inferred",
            Raw("    T.device_entry(); T.warp_id(); T.thread_id([64])\n"),
            "cannot infer the extent of `T.warp_id()`",
            (1, 23),
            Some("declare it"),
        ),
        c("lane_id extent", Raw("    T.device_entry(); T.lane_id([16]); T.thread_id([16])\n"), "`T.lane_id` extent must be 32, found 16", (1, 23), Some("T.lane_id([32])")),
        c("scope id dims", Raw("    T.device_entry(); T.warp_id([2, 2]); T.thread_id([128])\n"), "`T.warp_id` takes exactly one extent, found 2", (1, 33), None),
        c("store dtype mismatch", Body("    B[tid, 0] = tid\n"), "dtype mismatch: storing int32 into `B` of float32", (1, 17), Some("T.cast(..., \"float32\")")),
        c("binary dtype mismatch", Body("    x = A[tid, 0] + tid\n"), "dtype mismatch: int32 operand combined with float32", (1, 21), Some("T.cast")),
        c("integer true division", Body("    x = tid / 2\n"), "`/` on integers is not allowed in kernels", (1, 9), Some("use `//`")),
        c("immutable binding", Body("    x: T.let = tid + 1\n    x = tid + 2\n"), "`x` is already bound as `x: T.let`, which is immutable", (2, 5), Some("use a new name, or drop `T.let` to make `x` a mutable scalar")),
        c(
            "unknown dtype",
            Body("    L = T.alloc_buffer((4,), \"flaot32\", scope=\"local\")\n"),
            "unknown dtype `flaot32`",
            (1, 30),
            Some("did you mean `\"float32\"`?"),
        ),
        c("unknown memory scope", Body("    L = T.alloc_buffer((4,), \"float32\", scope=\"shard\")\n"), "unknown memory scope `shard`", (1, 47), Some("\"shared\"")),
        c(
            "layout size mismatch",
            Body("    L = T.alloc_buffer((32, 8), \"float32\", scope=\"shared\", layout=TileLayout(S[(32, 4)]))\n"),
            "layout covers 128 elements but the buffer shape (32, 8) has 256",
            (1, 67),
            None,
        ),
        c(
            "extent/stride count mismatch",
            File("from tvm.tirx.layout import S, TileLayout, laneid\nL = TileLayout(S[(32, 8):(1 @ laneid,)])\n"),
            "layout has 2 extents but 1 strides",
            (2, 26),
            Some("one stride per extent"),
        ),
        c("unknown axis", File("from tvm.tirx.layout import S\nL = S[(32, 8):(\"lane\", 1)]\n"), "unknown axis `lane`", (2, 16), None),
        c("unclosed bracket", Body("    x = T.max(tid, (3\n    B[tid, 0] = 1.0\n"), "unclosed `(`", (1, 14), Some("add the matching `)`")),
        c("inconsistent dedent", Body("    for i in range(2):\n        B[tid, i] = 1.0\n      B[tid, 3] = 1.0\n"), "inconsistent indentation", (3, 1), None),
        c("missing colon", Body("    for i in range(2)\n        B[tid, i] = 1.0\n"), "expected `:`, found end of line", (1, 22), None),
        c("missing operand", Body("    Tx.warp.copy(B[0:32, 0:8])\n"), "`copy` is missing its `src` operand", (1, 5), Some("copy(dst, src, mask=None, other=None, clip=False)")),
        c("too many operands", Body("    Tx.sqrt(B, A, A, 1.0, 2.0)\n"), "`sqrt` takes at most 4 operands", (1, 27), None),
        c(
            "match_buffer after device_entry",
            Raw("    T.device_entry(); T.thread_id([32])\n    C = T.match_buffer(A_ptr, (4,), \"float32\")\n"),
            "`T.match_buffer` after `T.device_entry()`",
            (2, 9),
            None,
        ),
        c("device code before device_entry", Raw("    T.cuda.cta_sync()\n    T.device_entry(); T.thread_id([32])\n"), "device code before `T.device_entry()`", (1, 5), Some("T.device_entry()")),
        c("while loop on a constant", Body("    while True:\n        pass\n"), "a `while` loop's condition is a compile-time value", (1, 11), Some("loop on a kernel value")),
        c("runtime region extent", Body("    Tx.copy(B[tid:2 * tid, 0:8], A[0:1, 0:8])\n"), "region extents must be compile-time constants", (1, 15), Some("x : x + n")),
        c("buffer as scalar operand", Body("    Tx.fill(B[0:32, 0:8], A)\n"), "`value` of `fill` must be a scalar, found a buffer", (1, 27), None),
        c("local() of shared", Body("    Sh = T.alloc_shared((32, 8), \"float32\")\n    L = Sh.local()\n"), "`.local()` needs a register buffer; `Sh` is in shared", (2, 9), None),
        c("index count", Body("    B[tid] = 1.0\n"), "`B` has 2 dimension(s) but 1 index(es) were given", (1, 5), None),
        c("unknown layout import", File("from tvm.tirx.layout import laneidd\n"), "`tvm.tirx.layout` has no `laneidd` known to tirx", (1, 29), Some("did you mean `laneid`?")),
        c("T not imported", File("@T.prim_func\ndef k():\n    pass\n"), "unknown name `T`", (1, 2), Some("from tvm.script import tirx as T")),
        c("condition not bool", Body("    if tid:\n        B[tid, 0] = 1.0\n"), "expected a condition (bool), found int32", (1, 8), Some("x != 0")),
        c("two device entries", Body("    T.device_entry()\n"), "`T.device_entry()` appears twice", (1, 5), None),
        c("grid arity", Body("    for i in T.grid(2, 3):\n        B[tid, i] = 1.0\n"), "`T.grid` has 2 extents but the loop binds 1 variables", (1, 14), None),
        c("constant overflow", File("X = 10 ** 30\n"), "arithmetic overflow in a constant expression", (1, 5), None),
        c("number too large", File("X = 99999999999999999999\n"), "invalid number", (1, 5), None),
        c("division by zero", File("X = 4 // 0\n"), "division by zero", (1, 5), None),
        c("no kernel", File("from tvm.script import tirx as T\nX = 1\n"), "no kernel found", (3, 1), Some("@T.prim_func")),
        c("statement has no effect", Body("    tid + 1\n"), "expression statement has no effect", (1, 5), None),
        c("unpack count", File("a, b = (1, 2, 3)\n"), "cannot unpack 3 values into 2 names", (1, 1), None),
        c(
            "conflicting thread axes",
            Body("    R = T.alloc_local((32, 8), \"float32\", layout=TileLayout(S[(32, 8):(1@laneid, 8@laneid)]))\n    Q = T.alloc_local((32, 2), \"float32\", layout=TileLayout(S[(32, 2):(1@laneid, 1@tx)]))\n"),
            "invalid layout: conflicting thread axes",
            (2, 50),
            None,
        ),
        c("misspelled keyword", Body("    L = T.alloc_buffer((4,), \"float32\", scop=\"local\")\n"), "`T.alloc_buffer` has no parameter `scop`", (1, 41), Some("did you mean `scope=`?")),
        c("loop step", Body("    for i in range(0, 8, 2):\n        pass\n"), "steps are not supported", (1, 14), None),
        c("cast into wrong dtype", Body("    B[tid, 0] = T.cast(tid, \"float16\")\n"), "dtype mismatch: storing float16 into `B` of float32", (1, 17), Some("T.cast(..., \"float32\")")),
        c(
            "elementwise operand shape",
            Body("    L = T.alloc_local((32, 8), \"float32\")\n    Tx.sqrt(L[0:32, 0:8], L[0:32, 0:4])\n"),
            "operand region (32, 4) does not match the destination region (32, 8) of `sqrt`",
            (2, 27),
            Some("destination's extents"),
        ),
        c(
            "non-injective register layout",
            Body("    R = T.alloc_buffer((8, 4, 4, 8, 8), \"float32\", scope=\"local\", layout=TileLayout(S[(8, 4, 4, 8, 8):(4, 1@warpid, 8@laneid, 1@laneid, 1)]))\n"),
            "non-injective layout for `R`: elements (0, 0, 0, 0, 4) and (1, 0, 0, 0, 0) both map to register 4 of thread (warpid 0, laneid 0)",
            (1, 74),
            Some("e.g. `S[(8, 4, 4, 8, 8):(8, 1@warpid, 8@laneid, 1@laneid, 1)]`"),
        ),
        c(
            "duplicated stride in shared memory",
            Body("    H = T.alloc_buffer((32, 8), \"float32\", scope=\"shared\", layout=TileLayout(S[(32, 8):(1, 1)]))\n"),
            "non-injective layout for `H`: elements (0, 1) and (1, 0) both map to shared-memory offset 1",
            (1, 67),
            Some("iter 0 needs a stride of at least 8"),
        ),
        c(
            "broadcast stride in a parameter",
            File("from tvm.script import tirx as T\nfrom tvm.tirx.layout import S, TileLayout\n@T.prim_func\ndef k(C_ptr: T.handle):\n    C = T.match_buffer(C_ptr, (4, 8), \"float32\", layout=TileLayout(S[(4, 8):(8, 0)]))\n"),
            "non-injective layout for `C`: elements (0, 0) and (0, 1) both map to global-memory offset 0",
            (5, 57),
            Some("iter 1 (extent 8, stride 0) repeats one home"),
        ),
        c(
            "non-injective view",
            Body("    V = A.view(16, 16, layout=TileLayout(S[(16, 16):(8, 1)]))\n"),
            "non-injective layout for `V`: elements (0, 8) and (1, 0) both map to global-memory offset 8",
            (1, 31),
            Some("iter 0 needs a stride of at least 16"),
        ),
        c("view larger than base", Body("    V = A.view(16, 17)\n"), "view (16, 17) reaches 272 elements but `A` holds 256", (1, 16), Some("must fit")),
        c("too many threads", Raw("    T.device_entry(); T.warp_id([64]); T.lane_id([32])\n"), "a CTA has at most 1024 threads, this kernel declares 2048", (1, 23), Some("more CTAs")),
        c("compose swizzle args", File("from tvm.tirx.layout import S, TileLayout, ComposeLayout\nL = ComposeLayout(3, 3, 1, TileLayout(S[64]))\n"), "ComposeLayout needs atom_len >= swizzle_len", (2, 5), None),
        c("compose swizzle too wide", File("from tvm.tirx.layout import S, TileLayout, ComposeLayout\nL = ComposeLayout(16, 12, 16, TileLayout(S[64]))\n"), "per_element + swizzle_len + atom_len = 44 exceeds 40", (2, 5), None),
    ]
}

fn errors(src: &str) -> Vec<Diagnostic> {
    match tirx_script::parse_kernel("case.py", src) {
        Ok(_) => vec![],
        Err(d) => d,
    }
}

#[test]
fn bad_inputs_report_message_location_and_fix() {
    let cases = cases();
    assert!(cases.len() >= 30);
    let mut failures = vec![];
    for c in &cases {
        let (src, offset) = source(c);
        let diags = errors(&src);
        let (line, col) = (c.at.0 + offset, c.at.1);
        let hit = diags.iter().find(|d| d.message.contains(c.message));
        let ok = match hit {
            None => false,
            Some(d) => {
                let at = line_col(&src, d.span().lo as usize);
                let loc_ok = at == (line, col);
                let help_ok = c.help.is_none_or(|h| d.help.as_deref().is_some_and(|x| x.contains(h)));
                loc_ok && help_ok
            }
        };
        if !ok {
            let got: Vec<String> = diags
                .iter()
                .map(|d| {
                    let (l, cc) = line_col(&src, d.span().lo as usize);
                    format!("  {l}:{cc} {} (help: {:?})", d.message, d.help)
                })
                .collect();
            failures.push(format!("[{}] want `{}` at {line}:{col}\n{}", c.name, c.message, got.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn several_errors_are_reported_in_one_run() {
    let src = format!(
        "{PREAMBLE}{DEVICE}    x = tid / 2\n    B[tid, 0] = AA\n    for i in range(2)\n        pass\n    y = tid +\n"
    );
    let diags = errors(&src);
    let lines: Vec<usize> = diags.iter().map(|d| line_col(&src, d.span().lo as usize).0).collect();
    for want in [PRE + 2, PRE + 3, PRE + 4, PRE + 6] {
        assert!(lines.contains(&want), "no error on line {want}: {lines:?}\n{diags:#?}");
    }
}

#[test]
fn a_failed_definition_does_not_cascade() {
    let src =
        format!("{PREAMBLE}{DEVICE}    L = T.alloc_local((4,), \"flaot32\")\n    L[0] = 1.0\n    Tx.fill(L, 2.0)\n");
    let diags = errors(&src);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert!(diags[0].message.contains("unknown dtype"));
}

#[test]
fn unit_dims_are_dropped_before_comparing_copy_regions() {
    let src = format!("{PREAMBLE}{DEVICE}    L = T.alloc_local((8,), \"float32\")\n    Tx.copy(L[0:8], A[tid, 0:8])\n");
    assert!(errors(&src).is_empty(), "{:?}", errors(&src));
}
