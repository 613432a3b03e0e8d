//! The forced fixed-width copies `vec_16b` … `vec_256b` (docs/tile-primitives.md §3.16),
//! the `vec_auto` dispatch group (§2.4) and symbolic begins on split dims (layout-model §3.2):
//! every width over every memory pair value-checked in the simulator, the PTX instruction
//! names in the LIR and the CUDA, cache hints, and each decline with its rule and message.

mod common;
use common::*;
use tirx_ir::lir::{LStmt, LStmtKind, LoadHints, MemOp, PtxDir, PtxVec};
use tirx_ir::op::Evict;
use tirx_ir::{Arch, DType};
use tirx_lower::LowerOptions;
use tirx_lower::{CommonRule, CopyRule};

const HEAD: &str = "from tvm.script import tirx as T\nfrom tvm.script.tirx import tile as Tx\nfrom tvm.tirx.layout import S, TileLayout, ComposeLayout\n";

/// One thread moves A[n:2n] through every memory pair with `variant`: global → registers →
/// shared → registers → B, and global → shared → C (`n` elements of `dt`).
fn all_pairs(variant: &str, dt: &str, n: i64, config: &str) -> String {
    let m = 2 * n;
    format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({m},), "{dt}")
    B = T.match_buffer(B_ptr, ({n},), "{dt}")
    C = T.match_buffer(C_ptr, ({n},), "{dt}")
    T.device_entry()
    T.cta_id([1])
    T.thread_id([1])
    R = T.alloc_local(({m},), "{dt}")
    S_ = T.alloc_buffer(({m},), "{dt}", scope="shared")
    Tx.copy(R[{n}:{m}], A[{n}:{m}], dispatch="{variant}"{config})
    Tx.copy(S_[0:{n}], R[{n}:{m}], dispatch="{variant}")
    Tx.copy(R[0:{n}], S_[0:{n}], dispatch="{variant}")
    Tx.copy(B[0:{n}], R[0:{n}], dispatch="{variant}")
    Tx.copy(S_[{n}:{m}], A[{n}:{m}], dispatch="{variant}"{config})
    Tx.copy(C[0:{n}], S_[{n}:{m}], dispatch="{variant}")
"#
    )
}

/// Simulates `l` with A = a pattern of `2n` elements; returns (A, B, C).
fn run(l: &tirx_lower::Lowered, dt: DType, n: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let a = pattern(dt, 2 * n);
    let bytes = n * dt.bytes() as usize;
    let mut params = vec![a.clone(), vec![0u8; bytes], vec![0u8; bytes]];
    let report = tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let c = params.pop().unwrap();
    let b = params.pop().unwrap();
    (a, b, c)
}

/// Every `PtxVec` of the kernel, in program order.
fn ptx(body: &[LStmt]) -> Vec<PtxVec> {
    let mut out = vec![];
    for s in body {
        if let LStmtKind::Memory(MemOp::PtxVec(p)) = &s.kind {
            out.push(p.clone());
        }
        for b in s.kind.bodies() {
            out.extend(ptx(b));
        }
    }
    out
}

#[test]
fn every_width_moves_every_memory_pair_with_one_instruction_per_side() {
    let cases: &[(&str, u32, &[&str], &str)] = &[
        ("vec_16b", 2, &["uint16", "float16", "int8"], "u16"),
        ("vec_32b", 4, &["uint32", "float16", "uint8", "float32"], "u32"),
        ("vec_64b", 8, &["uint32", "bfloat16", "float64", "int8"], "v2.u32"),
        ("vec_128b", 16, &["float32", "float16", "float64", "uint8"], "v4.u32"),
    ];
    for &(variant, bytes, dtypes, tail) in cases {
        for dt in dtypes {
            let t = DType::from_name(dt).unwrap();
            let n = (bytes / t.bytes()) as usize;
            let src = all_pairs(variant, dt, n as i64, "");
            let l = lower(&src);
            for i in 0..6 {
                assert_eq!(call(&l, i).chosen.as_deref(), Some(variant), "{}", call(&l, i).render());
                assert_eq!(call(&l, i).vec, Some(n as u32));
            }
            // g→r, r→s, s→r, r→g, then g→s and s→g through a register temporary each.
            let p = ptx(&l.lir.body);
            assert_eq!(p.len(), 8, "{}", l.lir);
            assert!(p.iter().all(|p| p.bytes == bytes));
            let tir = l.lir.to_string();
            for want in [
                format!("ld.global.{tail} R[{n}..+{n}] <- A[{n}]"),
                format!("st.shared.{tail} S_[0] <- R[{n}..+{n}]"),
                format!("ld.shared.{tail} R[0..+{n}] <- S_[0]"),
                format!("st.global.{tail} B[0] <- R[0..+{n}]"),
                format!("ld.global.{tail} A_reg[0..+{n}] <- A[{n}]"),
                format!("st.shared.{tail} S_[{n}] <- A_reg[0..+{n}]"),
                format!("ld.shared.{tail} S__reg[0..+{n}] <- S_[{n}]"),
                format!("st.global.{tail} C[0] <- S__reg[0..+{n}]"),
            ] {
                assert!(tir.contains(&want), "{variant} {dt}: no `{want}` in\n{tir}");
            }
            let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
            for op in ["ld.global", "st.shared", "ld.shared", "st.global"] {
                assert!(cuda.contains(&format!("asm volatile(\"{op}.{tail} ")), "{variant} {dt} {op}:\n{cuda}");
            }
            let word =
                if bytes == 2 { "\"h\"(*reinterpret_cast<unsigned short*>" } else { "reinterpret_cast<unsigned*>" };
            assert!(cuda.contains(word), "{cuda}");
            assert!(!cuda.contains("__ldg") && !cuda.contains("uint4"), "{cuda}");
            let (a, b, c) = run(&l, t, n);
            let half = &a[a.len() / 2..];
            assert_eq!(b, half, "{variant} {dt}: global → registers → shared → registers → global");
            assert_eq!(c, half, "{variant} {dt}: global → shared → global");
        }
    }
}

#[test]
fn each_thread_moves_its_own_vector_at_a_symbolic_begin() {
    // 64 threads, each moves 4 f32 at A[tid * 4]: the begin moves in steps of 4 (aligned).
    let src = format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (256,), "float32")
    B = T.match_buffer(B_ptr, (256,), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([64])
    R = T.alloc_local((4,), "float32")
    S_ = T.alloc_buffer((256,), "float32", scope="shared")
    base: T.let = tid * 4
    Tx.copy(R[0:4], A[base : base + 4], dispatch="vec_128b", cache="nc")
    Tx.copy(S_[(63 - tid) * 4 : (63 - tid) * 4 + 4], R[0:4], dispatch="vec_128b")
    T.cuda.cta_sync()
    Tx.copy(B[base : base + 4], S_[base : base + 4], dispatch="vec_128b")
"#
    );
    let l = lower(&src);
    let a = pattern(DType::F32, 256);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    // B's row r is A's row 63 - r.
    for r in 0..64 {
        assert_eq!(params[1][r * 16..r * 16 + 16], a[(63 - r) * 16..(63 - r) * 16 + 16], "row {r}");
    }
    let hints: Vec<LoadHints> = ptx(&l.lir.body)
        .iter()
        .filter_map(|p| match p.dir {
            PtxDir::Ld(h) => Some(h),
            PtxDir::St => None,
        })
        .collect();
    assert_eq!(hints, vec![LoadHints { nc: true, ..Default::default() }, LoadHints::default()]);
}

#[test]
fn cache_hints_are_printed_in_the_isa_order_and_take_both_spellings() {
    let config = r#", cache="nc", l1_evict="L1::no_allocate", prefetch_size="L2::256B""#;
    let l = lower(&all_pairs("vec_128b", "int32", 4, config));
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("asm volatile(\"ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\""));
    assert_eq!(cuda.matches("ld.global.nc.L1::no_allocate.L2::256B.v4.u32").count(), 2, "{cuda}");
    // Stores and shared loads carry no hint.
    assert!(cuda.contains("st.global.v4.u32") && cuda.contains("ld.shared.v4.u32"), "{cuda}");
    let ours = lower(&all_pairs("vec_128b", "int32", 4, r#", l1_evict="evict_last", prefetch_size=64"#));
    let tir = ours.lir.to_string();
    assert!(tir.contains("ld.global.L1::evict_last.L2::64B.v4.u32"), "{tir}");
    let (a, b, c) = run(&l, DType::I32, 4);
    assert_eq!((&b[..], &c[..]), (&a[16..], &a[16..]));
}

/// The explain record of the first call of a kernel that fails to lower.
fn declined(src: &str, arch: Arch) -> (tirx_lower::CallExplain, Vec<tirx_ir::Diagnostic>) {
    let (ex, r) = tirx_lower::explain_kernel(&parse(src), &LowerOptions::for_arch(arch));
    let errs = r.err().unwrap_or_else(|| panic!("expected an error:\n{src}"));
    (ex.into_iter().next().expect("one call"), errs)
}

/// A thread-scope kernel: `decls` then `call`.
fn one_call(decls: &str, call: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), "float32")
    T.device_entry()
    T.cta_id([1])
    T.lane_id([32])
    tid = T.thread_id([32])
    smem = T.alloc_buffer((64,), "float32", scope="shared")
    reg = T.alloc_local((8,), "float32")
{decls}    {call}
"#
    )
}

#[test]
fn declines_name_the_rule_and_the_reference_message() {
    let cases: &[(&str, &str, Rule, &str)] = &[
        ("", r#"Tx.warp.copy(smem[0:4], A[0:4], dispatch="vec_128b")"#, CommonRule::ExecScope.into(), "expected thread exec_scope, got warp"),
        ("", r#"Tx.copy(smem[0:4], reg[0:4], dispatch="vec_64b")"#, CopyRule::RegionSize.into(), "src region does not contain exactly 2 elements"),
        ("", r#"Tx.copy(smem[0:1], reg[0:1], dispatch="vec_16b")"#, CommonRule::Dtype.into(), "vec_16b is not an integral number of float32 elements"),
        ("", r#"Tx.copy(reg[0:4], smem[0:4], dispatch="vec_128b", cache="nc")"#, CommonRule::Config.into(), "requires src scope 'global', got 'shared'"),
        ("", r#"Tx.copy(reg[0:4], A[0:4], dispatch="vec_128b", l2_evict="evict_first")"#, CommonRule::Config.into(), "on 256-bit loads only"),
        ("", r#"Tx.copy(reg[0:4], reg[4:8], dispatch="vec_128b")"#, CommonRule::ScopeAllowed.into(), "src=local dst=local"),
        ("", r#"Tx.copy(reg[0:4], A[2:6], dispatch="vec_128b")"#, CopyRule::Alignment.into(), "the region of `A` starts at element 2"),
        ("", r#"Tx.copy(reg[2:6], A[0:4], dispatch="vec_128b")"#, CopyRule::Alignment.into(), "the registers of `reg` start at element 2"),
        (
            "    G = T.alloc_buffer((4, 16), \"float32\", scope=\"shared\")\n",
            r#"Tx.copy(reg[0:4], G[0:4, 0], dispatch="vec_128b")"#,
            CommonRule::Layout.into(),
            "the region of `G` is not 4 consecutive elements",
        ),
        (
            "    W = T.alloc_buffer((64,), \"float32\", scope=\"shared\", layout=ComposeLayout(1, 2, 2, TileLayout(S[64])))\n",
            r#"Tx.copy(reg[0:4], W[0:4], dispatch="vec_128b")"#,
            CopyRule::Swizzle.into(),
            "swizzled in chunks of 2 elements",
        ),
        (
            "",
            r#"Tx.copy(reg[0:4], A[(tid % 16) * 2 : (tid % 16) * 2 + 4], dispatch="vec_128b")"#,
            CopyRule::Alignment.into(),
            "the symbolic begin of `A` moves in steps of 2 elements",
        ),
        ("", r#"Tx.copy(reg[0:8], A[0:8], dispatch="vec_256b")"#, CommonRule::Arch.into(), "vec_256b needs sm_100; target is sm_90a"),
    ];
    for (decls, c, want, msg) in cases {
        let src = one_call(decls, c);
        let (ex, errs) = declined(&src, Arch::SM_90A);
        let name = ex.forced.clone().unwrap();
        assert_eq!(rule(&ex, &name), *want, "{c}\n{}", ex.render());
        assert!(tried(&ex, &name).reason.contains(msg), "{c}: want `{msg}`\n{}", ex.render());
        // The error at the call carries the decline (what the reference's tests match).
        assert!(render(&errs, &src).contains(msg), "{}", render(&errs, &src));
        assert!(errs[0].message.starts_with(&format!("the forced variant '{name}' does not apply")), "{errs:?}");
    }
}

#[test]
fn vec_256b_lowers_for_sm_100_between_global_memory_and_registers() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8,), "int32")
    B = T.match_buffer(B_ptr, (8,), "int32")
    T.device_entry()
    T.cta_id([1])
    T.thread_id([1])
    reg = T.alloc_local((8,), "int32")
    Tx.copy(reg[:], A[:], dispatch="vec_256b", cache="nc", l1_evict="L1::no_allocate", l2_evict="L2::evict_first", prefetch_size="L2::256B")
    Tx.copy(B[:], reg[:], dispatch="vec_256b")
"#
    );
    let k = parse(&src);
    let l = tirx_lower::lower_kernel(&k, &LowerOptions::for_arch(Arch::SM_100)).expect("lowers for sm_100");
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(
        cuda.contains(
            "ld.global.nc.L1::no_allocate.L2::evict_first.L2::256B.v8.u32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
        ),
        "{cuda}"
    );
    assert!(cuda.contains("st.global.v8.u32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8};"), "{cuda}");
    assert_eq!(l.lir.first_unsupported(Arch::SM_90A).map(|s| l.lir.min_arch(s)), Some(Arch::SM_100));
    let a = pattern(DType::I32, 8);
    let mut params = vec![a.clone(), vec![0u8; 32]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    assert_eq!(params[1], a);
    // Shared memory has no 256-bit access.
    let shared =
        src.replace("reg = T.alloc_local((8,), \"int32\")", "reg = T.alloc_buffer((8,), \"int32\", scope=\"shared\")");
    let shared = shared.replace(
        r#", cache="nc", l1_evict="L1::no_allocate", l2_evict="L2::evict_first", prefetch_size="L2::256B""#,
        "",
    );
    let (ex, _) = declined(&shared, Arch::SM_100);
    assert_eq!(rule(&ex, "vec_256b"), CommonRule::ScopeAllowed, "{}", ex.render());
}

#[test]
fn forced_only_variants_are_tried_and_shown_only_when_named() {
    let l = lower(&all_pairs("vec_32b", "float32", 1, ""));
    let plain = lower(&RoundTrip::full("thread", 1, &[4], "float32").script());
    for c in &plain.explain {
        assert!(c.tried.iter().all(|t| !t.variant.starts_with("vec_")), "{}", c.render());
    }
    let c = call(&l, 0);
    let shown: Vec<&str> = c.tried.iter().map(|t| t.variant.as_str()).filter(|v| v.starts_with("vec_")).collect();
    assert_eq!(shown, vec!["vec_32b"], "{}", c.render());
    assert!(c.render().contains("forced: dispatch=\"vec_32b\""), "{}", c.render());
}

#[test]
fn vec_auto_is_the_group_of_automatic_vectorized_copies() {
    // Shared ↔ registers at thread scope: the group picks `reg`; fallback would also accept.
    let src = format!(
        r#"{HEAD}
@T.prim_func
def kernel(B_ptr: T.handle):
    B = T.match_buffer(B_ptr, (4,), "float32")
    T.device_entry()
    T.cta_id([1])
    T.thread_id([1])
    smem = T.alloc_buffer((4,), "float32", scope="shared")
    reg = T.alloc_buffer((4,), "float32", scope="local", layout=TileLayout(S[4]))
    out = T.alloc_buffer((4,), "float32", scope="local", layout=TileLayout(S[4]))
    for i in range(4):
        reg[i] = T.cast(i + 1, "float32")
    Tx.copy(smem[:], reg[:], dispatch="vec_auto")
    T.cuda.cta_sync()
    Tx.copy(out[:], smem[:], dispatch="vec_auto")
    Tx.copy(B[:], out[:], dispatch="vec_auto")
"#
    );
    let l = lower(&src);
    for i in 0..3 {
        let c = call(&l, i);
        assert_eq!(c.chosen.as_deref(), Some("reg"), "{}", c.render());
        assert_eq!(c.group, vec!["gmem_smem_peel", "gmem_smem", "gmem_smem_predicated", "reg"]);
        assert!(tried(c, "fallback").skipped, "{}", c.render());
        assert!(!tried(c, "reg").skipped);
        let text = c.render();
        assert!(
            text.contains(
                "forced: dispatch=\"vec_auto\" (group: gmem_smem_peel, gmem_smem, gmem_smem_predicated, reg)"
            ),
            "{text}"
        );
        assert!(text.contains("(not used: not in the dispatch group \"vec_auto\")"), "{text}");
    }
    let json = serde_json::to_value(call(&l, 0)).unwrap();
    assert_eq!(json["group"], serde_json::json!(["gmem_smem_peel", "gmem_smem", "gmem_smem_predicated", "reg"]));
    let mut params = vec![vec![0u8; 16]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    assert_eq!(params[0], [1f32, 2.0, 3.0, 4.0].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
    // Global ↔ shared picks gmem_smem; a ragged tile gmem_smem_predicated.
    let rt = RoundTrip::full("warp", 32, &[4, 32], "float32").forced("vec_auto").check();
    assert_eq!(call(&rt, 0).chosen.as_deref(), Some("gmem_smem"));
    let ragged = RoundTrip::full("warp", 32, &[4, 6], "float32").forced("vec_auto").check();
    assert_eq!(call(&ragged, 0).chosen.as_deref(), Some("gmem_smem_predicated"));
}

#[test]
fn no_member_of_the_group_applying_is_an_error_naming_the_group() {
    // Registers → registers: only the fallback (not in the group) would copy it.
    let src = one_call("", r#"Tx.copy(reg[0:4], reg[4:8], dispatch="vec_auto")"#);
    let errs = lower_errors(&src);
    assert_eq!(
        errs[0].message,
        "no variant of the dispatch group 'vec_auto' (gmem_smem_peel, gmem_smem, gmem_smem_predicated, reg) applies to this `copy`"
    );
    let table = &errs[0].notes[0];
    let row = table.lines().find(|l| l.starts_with("fallback (prio=0)")).unwrap_or_default();
    assert!(row.ends_with("| would accept (not used: not in the dispatch group \"vec_auto\")"), "{table}");
}

/// The reference's test kernel: a swizzled (64, 256) f32 tile over 64 KiB (so in dynamic
/// shared memory), each of 128 threads at row `tid % 64`, columns `(tid // 64) * 4 + 0..4`:
/// the column begin is symbolic on a dim the layout splits into `8:2048, 32:1`.
#[test]
fn a_symbolic_begin_on_a_split_dim_of_a_swizzled_tile_is_aligned_and_exact() {
    let src = format!(
        r#"{HEAD}
smem_layout = ComposeLayout(2, 3, 3, TileLayout(S[(64, 8, 32) : (32, 2048, 1)]))

@T.prim_func
def kernel(B_ptr: T.handle):
    B = T.match_buffer(B_ptr, (128, 4), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([128])
    smem = T.alloc_buffer((64, 256), "float32", scope="shared", layout=smem_layout)
    reg = T.alloc_local((4,), "float32")
    out = T.alloc_local((4,), "float32")
    for i in range(4):
        reg[i] = T.cast(tid * 16 + i + 1, "float32")
    row: T.let = tid % 64
    col: T.let = (tid // 64) * 4
    Tx.copy(smem[row, col : col + 4], reg[:], dispatch="vec_128b")
    T.cuda.cta_sync()
    Tx.copy(out[:], smem[row, col : col + 4], dispatch="vec_128b")
    for i in range(4):
        B[tid, i] = out[i]
"#
    );
    let l = lower(&src);
    assert_eq!(l.notes.len(), 1, "64 KiB of `shared` go to dynamic shared memory");
    let cuda = tirx_cuda::generate(&l.lir).unwrap();
    assert_eq!(cuda.meta.dynamic_smem_bytes, 64 * 1024);
    assert!(cuda.source.contains("st.shared.v4.u32") && cuda.source.contains("ld.shared.v4.u32"));
    let mut params = vec![vec![0u8; 128 * 16]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates without races");
    let want: Vec<u8> =
        (0..128).flat_map(|t| (0..4).map(move |i| (t * 16 + i + 1) as f32)).flat_map(f32::to_le_bytes).collect();
    assert_eq!(params[0], want);
    // Where the begin is not a multiple of the vector, the same copy declines alignment.
    let odd = src.replace("col: T.let = (tid // 64) * 4", "col: T.let = (tid // 64) * 2");
    let (ex, _) = declined(&odd, Arch::SM_90A);
    assert_eq!(rule(&ex, "vec_128b"), CommonRule::SymbolicBegin, "{}", ex.render());
}

/// The automatic copies get the same operand model: `reg` moves a row of the split, swizzled
/// dim at a symbolic column with 16-byte vectors too.
#[test]
fn the_register_variant_takes_a_symbolic_begin_on_a_split_dim() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 256), "float32")
    B = T.match_buffer(B_ptr, (4, 256), "float32")
    T.device_entry()
    bx = T.cta_id([32])
    T.thread_id([1])
    smem = T.alloc_buffer((4, 256), "float32", scope="shared", layout=TileLayout(S[(4, 8, 32) : (32, 128, 1)]))
    reg = T.alloc_local((4, 8), "float32")
    Tx.copy(reg[:, :], A[:, bx * 8 : bx * 8 + 8])
    Tx.copy(smem[:, bx * 8 : bx * 8 + 8], reg[:, :])
    Tx.copy(reg[:, :], smem[:, bx * 8 : bx * 8 + 8])
    Tx.copy(B[:, bx * 8 : bx * 8 + 8], reg[:, :])
"#
    );
    let l = lower(&src);
    for i in 0..4 {
        assert_eq!(
            (call(&l, i).chosen.as_deref(), call(&l, i).vec),
            (Some("reg"), Some(4)),
            "{}",
            call(&l, i).render()
        );
    }
    let a = pattern(DType::F32, 1024);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    assert_eq!(params[1], a);
}

#[test]
fn hint_values_are_typed_when_the_script_is_read() {
    for (kw, bad) in
        [("l1_evict", "\"L2::evict_first\""), ("l2_evict", "\"no_allocate\""), ("prefetch_size", "\"L2::100B\"")]
    {
        let src = one_call("", &format!("Tx.copy(reg[0:4], A[0:4], dispatch=\"vec_128b\", {kw}={bad})"));
        let err = match tirx_script::parse_kernel("k.py", &src) {
            Err(d) => render(&d, &src),
            Ok(_) => panic!("{kw}={bad} parsed"),
        };
        assert!(err.contains(&format!("`{kw}` expects")), "{err}");
    }
    let src = one_call("", r#"Tx.copy(reg[0:4], A[0:4], dispatch="vec_128b", l1_evict="L1::evict_first")"#);
    let k = parse(&src);
    let l = tirx_lower::lower_kernel(&k, &Default::default()).unwrap();
    assert_eq!(ptx(&l.lir.body)[0].dir, PtxDir::Ld(LoadHints { l1: Some(Evict::First), ..Default::default() }));
}

#[test]
fn a_hint_only_forced_variants_honour_says_so_when_no_variant_is_forced() {
    let src = one_call("", r#"Tx.copy(reg[0:4], A[0:4], l1_evict="evict_last")"#);
    let (ex, errs) = declined(&src, Arch::SM_90A);
    assert_eq!(rule(&ex, "reg"), CommonRule::Config, "{}", ex.render());
    assert!(
        tried(&ex, "reg").reason.ends_with(
            "does not honour `l1_evict=\"evict_last\"` (honoured by: only when forced: vec_128b, vec_16b, vec_256b, vec_32b, vec_64b)"
        ),
        "{}",
        ex.render()
    );
    assert!(ex.tried.iter().all(|t| !t.variant.starts_with("vec_")), "not tried unless forced");
    assert!(render(&errs, &src).contains("`l1_evict` is not honoured here"), "{}", render(&errs, &src));
}
