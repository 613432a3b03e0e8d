//! copy → ldstmatrix: the seed demo, the §5.4 matrix (scope × trans × ld/st ×
//! num, plain and swizzled) value-checked in the simulator with every
//! register checked through per-thread accesses, the exact PTX in the CUDA,
//! the swizzle walk, and declines (dtype, fragment, alignment) that copy→reg
//! then lowers correctly.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::{CallExplain, Lowered};
use tirx_lower::{CommonRule, CopyRule};

/// One iter of a test layout: a whole dimension `(extent, stride, axis)`, axis "" = memory.
type Dim = (i64, i64, &'static str);

/// A register ↔ shared copy kernel. ld: A → A_smem (copy) → R (the call under
/// test) → B through per-thread register reads; st: A → R through per-thread
/// register writes → A_smem (the call under test) → B (copy). B == A iff every
/// register held the element its layout names.
#[derive(Clone, Debug)]
struct Kernel {
    /// `warp`, `wg`, `cta`.
    scope: &'static str,
    threads: i64,
    dtype: &'static str,
    /// The register layout, one iter per dimension (the buffer shape is the extents).
    r: Vec<Dim>,
    /// The shared layout expression.
    s_layout: String,
    store: bool,
}

fn layout_text(dims: &[Dim]) -> String {
    let e: Vec<String> = dims.iter().map(|d| d.0.to_string()).collect();
    let s: Vec<String> =
        dims.iter().map(|d| if d.2.is_empty() { d.1.to_string() } else { format!("{}@{}", d.1, d.2) }).collect();
    format!("TileLayout(S[({}):({})])", e.join(", "), s.join(", "))
}

impl Kernel {
    fn shape(&self) -> Vec<i64> {
        self.r.iter().map(|d| d.0).collect()
    }

    /// Registers per thread (the layout's memory iters are compact).
    fn regs(&self) -> i64 {
        self.r.iter().filter(|d| d.2.is_empty()).map(|d| d.0).product()
    }

    /// The thread's registers in logical order: `R.local(layout=<this>)` (a plain
    /// `R.local()` is in register order).
    fn storage(&self) -> String {
        let mem: Vec<_> = self.r.iter().filter(|d| d.2.is_empty()).collect();
        let e: Vec<String> = mem.iter().map(|d| d.0.to_string()).collect();
        let st: Vec<String> = mem.iter().map(|d| d.1.to_string()).collect();
        format!("({},):({},)", e.join(", "), st.join(", "))
    }

    /// The logical index of element `i` of `R.local(layout=storage)` (the thread's
    /// elements in logical order) on thread `tid`, per dimension.
    fn coords(&self) -> String {
        let mut below = 1;
        let mut c: Vec<String> = Vec::new();
        for &(e, s, a) in self.r.iter().rev() {
            let v = match a {
                "" => {
                    below *= e;
                    format!("i // {} % {e}", below / e)
                }
                "laneid" => format!("(tid % 32) // {s} % {e}"),
                "tid_in_wg" => format!("(tid % 128) // {s} % {e}"),
                _ => format!("tid // {s} % {e}"),
            };
            c.push(v);
        }
        c.reverse();
        c.join(", ")
    }

    fn script(&self) -> String {
        let shape = self.shape();
        let tup = format!("({},)", shape.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "));
        let full = shape.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ");
        let t = self.threads;
        let ids = match self.scope {
            "warp" => "T.lane_id([32]); tid = T.thread_id([32])".to_string(),
            "wg" => format!("T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id_in_wg([128]); tid = T.thread_id([{t}])"),
            _ => format!("T.warp_id([{}]); T.lane_id([32]); tid = T.thread_id([{t}])", t / 32),
        };
        let sc = self.scope;
        let (m, coords) = (self.regs(), self.coords());
        let body = if self.store {
            format!(
                "    for i in range({m}):\n        R_local[i] = A[{coords}]\n    Tx.{sc}.copy(A_smem[{full}], R[{full}])\n    T.cuda.cta_sync()\n    Tx.{sc}.copy(B[{full}], A_smem[{full}])\n"
            )
        } else {
            format!(
                "    Tx.{sc}.copy(A_smem[{full}], A[{full}])\n    T.cuda.cta_sync()\n    Tx.{sc}.copy(R[{full}], A_smem[{full}])\n    for i in range({m}):\n        B[{coords}] = R_local[i]\n"
            )
        };
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid, tid_in_wg, tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {tup}, "{dt}")
    B = T.match_buffer(B_ptr, {tup}, "{dt}")
    T.device_entry()
    T.cta_id([1]); {ids}
    A_smem = T.alloc_buffer({tup}, "{dt}", scope="shared", layout={sl})
    R = T.alloc_buffer({tup}, "{dt}", scope="local", layout={rl})
    R_local = R.local(layout=TileLayout(S[{storage}]))
{body}"#,
            dt = self.dtype,
            sl = self.s_layout,
            rl = layout_text(&self.r),
            storage = self.storage(),
        )
    }

    /// Lowers, simulates and checks B == A; returns the lowering and the record of the register copy.
    fn check(&self) -> (Lowered, CallExplain) {
        let src = self.script();
        let l = lower(&src);
        let dt = DType::from_name(self.dtype).unwrap();
        let n: i64 = self.shape().iter().product();
        let a = pattern(dt, n as usize);
        let mut params = vec![a.clone(), vec![0u8; a.len()]];
        if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default()) {
            panic!("simulation failed: {e:?}\n{}\n{src}", l.lir);
        }
        let bytes = dt.bytes() as usize;
        for i in 0..n as usize {
            let (want, got) = (&a[i * bytes..(i + 1) * bytes], &params[1][i * bytes..(i + 1) * bytes]);
            assert_eq!(got, want, "B element {i} wrong\n{}\n{src}", l.lir);
        }
        let c =
            l.explain.iter().find(|c| c.operands.iter().any(|o| o.memory == "local")).expect("a register copy").clone();
        (l, c)
    }
}

fn fragment(scope: &str, num: i64) -> Vec<Dim> {
    match scope {
        "warp" => vec![(8, 4, "laneid"), (4, 1, "laneid"), (num, 2, ""), (2, 1, "")],
        s => {
            let t = if s == "wg" { "tid_in_wg" } else { "tx" };
            vec![(4, 32, t), (8, 4, t), (4, 1, t), (num, 2, ""), (2, 1, "")]
        }
    }
}

/// §3.4's shared layouts: row-major `(8num, 2, 8, 1)`, transposed `(1, 16num, 8, 8num)`,
/// with a leading warp dim `64num` for warpgroup / cta.
fn shared(scope: &str, num: i64, trans: bool, swizzle: bool) -> String {
    shared_units(scope, num, trans, swizzle, false)
}

/// [`shared`], or with `pairs` its 16-bit units as byte pairs: each stride doubled, then the
/// pair's bytes (128-byte swizzle of 16 bytes: `per_element` 4).
fn shared_units(scope: &str, num: i64, trans: bool, swizzle: bool, pairs: bool) -> String {
    let mut ext = vec![8, 4, num, 2];
    let mut st = if trans { vec![1, 16 * num, 8, 8 * num] } else { vec![8 * num, 2, 8, 1] };
    if scope != "warp" {
        ext.insert(0, 4);
        st.insert(0, 64 * num);
    }
    if pairs {
        st.iter_mut().for_each(|x| *x *= 2);
        ext.push(2);
        st.push(1);
    }
    let j = |v: &[i64]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
    let tile = format!("TileLayout(S[({}):({})])", j(&ext), j(&st));
    if swizzle {
        format!("ComposeLayout({}, 3, 3, {tile})", if pairs { 4 } else { 3 })
    } else {
        tile
    }
}

fn matrix_kernel(scope: &'static str, num: i64, trans: bool, store: bool, swizzle: bool) -> Kernel {
    Kernel {
        scope,
        threads: if scope == "warp" { 32 } else { 128 },
        dtype: "float16",
        r: fragment(scope, num),
        s_layout: shared(scope, num, trans, swizzle),
        store,
    }
}

fn ptx(store: bool, num: i64, trans: bool) -> String {
    let instr = if store { "stmatrix" } else { "ldmatrix" };
    format!("{instr}.sync.aligned.m8n8.x{num}{}.shared.b16", if trans { ".trans" } else { "" })
}

fn cuda(l: &Lowered) -> String {
    tirx_cuda::generate(&l.lir).unwrap_or_else(|e| panic!("{e}\n{}", l.lir)).source
}

#[test]
fn seed_demo() {
    let src = include_str!("../../../examples/copy_ldstmatrix.py");
    let l = lower(src);
    let c = &l.explain[0];
    assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{}", c.render());
    let t = tried(c, "ldstmatrix");
    assert!(
        t.reason.starts_with("ldmatrix.x2: num 2, trans false, 1 instruction per warp, rows 16 elements apart"),
        "{}",
        t.reason
    );
    assert!(cuda(&l).contains(&ptx(false, 2, false)));
    // The lane addresses: tile (lane / 8) % 2 at 8 elements, row lane % 8 at 16.
    let text = l.lir.to_string();
    assert!(text.contains("ldmatrix"), "{text}");
    let a = pattern(DType::F16, 128);
    let mut params = vec![a.clone(), vec![0u8; 256]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    assert_eq!(params[1], a);
}

/// §5.4 test_ldstmatrix and test_ldstmatrix_swizzle: 72 kernels.
#[test]
fn matrix_scope_trans_dir_num() {
    for swizzle in [false, true] {
        for scope in ["warp", "wg", "cta"] {
            for trans in [false, true] {
                for store in [false, true] {
                    for num in [1, 2, 4] {
                        let k = matrix_kernel(scope, num, trans, store, swizzle);
                        let (l, c) = k.check();
                        assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{k:?}\n{}", c.render());
                        let reason = &tried(&c, "ldstmatrix").reason;
                        assert!(
                            reason.contains(&format!("num {num}, trans {trans}, 1 instruction per warp")),
                            "{k:?}: {reason}"
                        );
                        let src = cuda(&l);
                        assert!(src.contains(&ptx(store, num, trans)), "{k:?}\n{src}");
                        assert!(!src.contains(&ptx(!store, num, trans)), "{k:?}\n{src}");
                    }
                }
            }
        }
    }
}

/// §5.4 swizzle_multi_iter_{pow2,linear}: 64 (80) registers per lane, four
/// tiles per instruction, 8 (10) instructions walked through the swizzle.
#[test]
fn swizzle_walk_multi_iter() {
    for outer in [4, 5] {
        for store in [false, true] {
            let k = Kernel {
                scope: "warp",
                threads: 32,
                dtype: "float16",
                r: vec![(outer, 16, ""), (8, 4, "laneid"), (2, 8, ""), (4, 2, ""), (4, 1, "laneid"), (2, 1, "")],
                s_layout: format!("ComposeLayout(3, 3, 3, TileLayout(S[({outer}, 8, 2, 4, 4, 2)]))"),
                store,
            };
            let (l, c) = k.check();
            assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{}", c.render());
            let reason = &tried(&c, "ldstmatrix").reason;
            let n = outer * 2;
            assert!(reason.contains(&format!("num 4, trans false, {n} instructions per warp")), "{reason}");
            assert!(reason.ends_with("swizzle fast path"), "{reason}");
            assert_eq!(c.rounds, Some(n as u64));
            let text = l.lir.to_string();
            assert!(text.contains("ss") && text.contains("s_base"), "{text}");
            let src = cuda(&l);
            assert!(src.contains("#pragma unroll") && src.contains(&ptx(store, 4, false)), "{src}");
        }
    }
}

/// A warpgroup epilogue: 64×64 bf16 accumulator fragments (warp w owns rows
/// 16w..16w+16, registers in mma order) to and from a 128B-swizzled tile.
#[test]
fn warpgroup_bf16_swizzled_epilogue() {
    for store in [false, true] {
        let t = "tid_in_wg";
        let k = Kernel {
            scope: "wg",
            threads: 128,
            dtype: "bfloat16",
            r: vec![(4, 32, t), (2, 2, ""), (8, 4, t), (8, 4, ""), (4, 1, t), (2, 1, "")],
            s_layout: "ComposeLayout(3, 3, 3, TileLayout(S[(4, 2, 8, 8, 4, 2)]))".into(),
            store,
        };
        let (l, c) = k.check();
        let reason = &tried(&c, "ldstmatrix").reason;
        assert!(
            reason.contains("num 4, trans false, 4 instructions per warp, rows 64 elements apart, swizzle fast path"),
            "{reason}"
        );
        assert!(cuda(&l).contains(&ptx(store, 4, false)));
    }
}

/// A register region of half the fragment tiles and a shared region at a tile offset.
#[test]
fn sub_regions() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 4, 4, 2), "float16")
    B = T.match_buffer(B_ptr, (8, 4, 4, 2), "float16")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer((8, 4, 4, 2), "float16", scope="shared", layout=TileLayout(S[(8, 4, 4, 2):(32, 2, 8, 1)]))
    R = T.alloc_buffer((8, 4, 4, 2), "float16", scope="local", layout=TileLayout(S[(8, 4, 4, 2):(4@laneid, 1@laneid, 2, 1)]))
    R_local = R.local()
    Tx.warp.copy(A_smem[0:8, 0:4, 0:4, 0:2], A[0:8, 0:4, 0:4, 0:2])
    T.cuda.cta_sync()
    Tx.warp.copy(R[0:8, 0:4, 2:4, 0:2], A_smem[0:8, 0:4, 0:2, 0:2])
    Tx.warp.copy(R[0:8, 0:4, 0:2, 0:2], A_smem[0:8, 0:4, 2:4, 0:2])
    for i in range(8):
        B[tid // 4, tid % 4, i // 2, i % 2] = R_local[i]
"#;
    let l = lower(src);
    for i in [1, 2] {
        assert_eq!(l.explain[i].chosen.as_deref(), Some("ldstmatrix"), "{}", l.explain[i].render());
    }
    let a = pattern(DType::F16, 256);
    let mut params = vec![a.clone(), vec![0u8; 512]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    // Tiles 0,1 and 2,3 swapped: B[.., n, ..] = A[.., (n + 2) % 4, ..].
    for (x, got) in params[1].chunks(2).enumerate() {
        let (n, rest) = ((x / 2) % 4, x % 2 + (x / 8) * 8);
        let want = rest + ((n + 2) % 4) * 2;
        assert_eq!(got, &a[want * 2..want * 2 + 2], "element {x}");
    }
}

fn decline_of(c: &CallExplain) -> (Rule, String) {
    (rule(c, "ldstmatrix"), tried(c, "ldstmatrix").reason.clone())
}

/// Declined copies are lowered by copy→reg, with the same values. The reason
/// is checked too: it names the fragment condition a user must fix.
fn declined(k: &Kernel, want: Rule, reason: &str) {
    let (_, c) = k.check();
    let (p, r) = decline_of(&c);
    assert_eq!(p, want, "{r}");
    assert!(r.contains(reason), "{r}");
    assert_eq!(c.chosen.as_deref(), Some("reg"), "{}", c.render());
}

#[test]
fn declines_32_bit_dtype() {
    for store in [false, true] {
        let mut k = matrix_kernel("warp", 2, false, store, false);
        k.dtype = "float32";
        declined(
            &k,
            CommonRule::Dtype.into(),
            "ldmatrix/stmatrix move 16-bit elements (.b16), or 8-bit ones in adjacent pairs; `",
        );
    }
}

#[test]
fn accepts_16_bit_dtypes() {
    for dt in ["bfloat16", "int16", "uint16"] {
        let mut k = matrix_kernel("warp", 4, true, false, false);
        k.dtype = dt;
        let (_, c) = k.check();
        assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{dt}: {}", c.render());
    }
}

/// 8-bit elements move as byte pairs: the m8n8 fragment of 16-bit units with
/// each unit two adjacent bytes in registers and in shared memory.
fn fragment8(scope: &str, num: i64) -> Vec<Dim> {
    let mut f = fragment(scope, num);
    let n = f.len();
    f[n - 2].1 = 4; // tiles: a 32-bit register (4 bytes) each
    f[n - 1] = (2, 2, ""); // the unit pair
    f.push((2, 1, "")); // the bytes of a unit
    f
}

/// FP8 (and any 8-bit type) through ldmatrix/stmatrix `.b16`: every scope, direction,
/// transposition, num and swizzle, values checked byte for byte.
#[test]
fn byte_pairs_scope_trans_dir_num() {
    for (dtype, swizzle) in [("float8_e4m3fn", false), ("float8_e4m3fn", true), ("uint8", false), ("float8_e5m2", true)]
    {
        for scope in ["warp", "wg", "cta"] {
            for trans in [false, true] {
                for store in [false, true] {
                    for num in [1, 2, 4] {
                        let k = Kernel {
                            scope,
                            threads: if scope == "warp" { 32 } else { 128 },
                            dtype,
                            r: fragment8(scope, num),
                            s_layout: shared_units(scope, num, trans, swizzle, true),
                            store,
                        };
                        let (l, c) = k.check();
                        assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{k:?}\n{}", c.render());
                        let reason = &tried(&c, "ldstmatrix").reason;
                        assert!(
                            reason.contains(&format!("num {num}, trans {trans}, 1 instruction per warp"))
                                && reason.ends_with("8-bit elements in pairs"),
                            "{k:?}: {reason}"
                        );
                        let src = cuda(&l);
                        assert!(src.contains(&ptx(store, num, trans)), "{k:?}\n{src}");
                    }
                }
            }
        }
    }
}

/// Bytes that are not adjacent pairs on both sides are declined with the reason (and the
/// copy lowered by copy→reg, the same values).
#[test]
fn byte_pairs_declined() {
    // Registers: the two bytes of a unit not adjacent (the pair and the bytes swapped).
    let mut k = Kernel {
        scope: "warp",
        threads: 32,
        dtype: "float8_e4m3fn",
        r: vec![(8, 4, "laneid"), (4, 1, "laneid"), (2, 4, ""), (2, 1, ""), (2, 2, "")],
        s_layout: "TileLayout(S[(8, 4, 2, 2, 2):(32, 4, 16, 2, 1)])".into(),
        store: false,
    };
    declined(
        &k,
        CopyRule::Fragment.into(),
        "8-bit elements move in pairs: the register pairs of `R` are not adjacent bytes of `A_smem`",
    );
    // Shared: a pair's bytes 8 apart.
    k.r = fragment8("warp", 2);
    k.s_layout = "TileLayout(S[(8, 4, 2, 2, 2):(32, 2, 16, 1, 8)])".into();
    declined(&k, CopyRule::Fragment.into(), "are not adjacent bytes of `A_smem`");
}

#[test]
fn declines_non_fragment_registers() {
    for store in [false, true] {
        // Lanes transposed: lane l holds row l % 8.
        let mut k = matrix_kernel("warp", 2, false, store, false);
        k.r = vec![(8, 1, "laneid"), (4, 8, "laneid"), (2, 2, ""), (2, 1, "")];
        declined(&k, CopyRule::Fragment.into(), "`R` is not the m8n8 fragment of `A_smem`: in the fragment's register order (lane l holds row l/4, column pair l%4 of each tile) the 8 rows of a tile are not evenly strided in `A_smem`");
        // Lane i holds row i of a 32×8 tile: in register order the shared tiles are not row-major.
        let k = Kernel {
            scope: "warp",
            threads: 32,
            dtype: "float16",
            r: vec![(32, 1, "laneid"), (8, 1, "")],
            s_layout: "TileLayout(S[(32, 8):(8, 1)])".into(),
            store,
        };
        declined(&k, CopyRule::Fragment.into(), "the tiles of `A_smem` are neither row-major");
    }
}

#[test]
fn declines_misaligned_shared_rows() {
    for store in [false, true] {
        let mut k = matrix_kernel("warp", 2, false, store, false);
        k.s_layout = "TileLayout(S[(8, 4, 2, 2):(20, 2, 8, 1)])".into();
        declined(&k, CopyRule::Alignment.into(), "the rows (row-major tiles) of `A_smem` are 20 elements (40 B) apart");
        // Tiles 12 elements apart: misaligned whether one instruction moves both (num 2) or each (num 1).
        let mut k = matrix_kernel("warp", 2, false, store, false);
        k.s_layout = "TileLayout(S[(8, 4, 2, 2):(32, 2, 12, 1)])".into();
        declined(&k, CopyRule::Fragment.into(), "num 2: the 2 tiles are 12 elements apart in shared memory");
    }
}

#[test]
fn declines_small_swizzle_chunk() {
    let mut k = matrix_kernel("warp", 2, false, false, false);
    k.s_layout = "ComposeLayout(2, 3, 3, TileLayout(S[(8, 4, 2, 2):(16, 2, 8, 1)]))".into();
    declined(&k, CopyRule::Swizzle.into(), "per_element=2 < 3");
}

/// Narrower `num` when wider ones do not divide the tiles, and the limits say why.
#[test]
fn narrower_num_and_limits() {
    let k = Kernel {
        scope: "warp",
        threads: 32,
        dtype: "float16",
        r: vec![(8, 4, "laneid"), (4, 1, "laneid"), (3, 2, ""), (2, 1, "")],
        s_layout: "TileLayout(S[(8, 4, 3, 2):(24, 2, 8, 1)])".into(),
        store: false,
    };
    let (l, c) = k.check();
    assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{}", c.render());
    let reason = &tried(&c, "ldstmatrix").reason;
    assert!(
        reason.starts_with("ldmatrix.x1: num 1, trans false, 3 instructions per warp, rows 24 elements apart"),
        "{reason}"
    );
    assert_eq!(
        c.limits,
        vec![
            "num 4: 3 register pairs per thread are not a multiple of 4".to_string(),
            "num 2: 3 register pairs per thread are not a multiple of 2".to_string()
        ]
    );
    assert!(c.render().contains("limit: num 4: 3 register pairs"), "{}", c.render());
    assert!(cuda(&l).contains(&ptx(false, 1, false)));
}

/// A per-warp fragment at warpgroup scope: every warp loads the same tiles,
/// but a store would have every warp write them (declined).
#[test]
fn replicated_registers() {
    for (store, chosen) in [(false, true), (true, false)] {
        let mut k = matrix_kernel("warp", 2, false, store, false);
        k.scope = "wg";
        k.threads = 128;
        let (calls, _) = tirx_lower::explain_kernel(&parse(&k.script()), &Default::default());
        let c = calls.iter().find(|c| c.operands.iter().any(|o| o.memory == "local")).expect("a register copy");
        if chosen {
            assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{}", c.render());
        } else {
            let (p, r) = decline_of(c);
            assert_eq!(p, CopyRule::Replicated, "{r}");
            assert!(r.contains("every warp would store the same shared elements"), "{r}");
        }
    }
}

#[test]
fn explain_shows_the_failed_condition() {
    let mut k = matrix_kernel("warp", 2, false, false, false);
    k.r = vec![(8, 1, "laneid"), (4, 8, "laneid"), (2, 2, ""), (2, 1, "")];
    let (calls, _) = tirx_lower::explain_kernel(&parse(&k.script()), &Default::default());
    let text = calls[1].render();
    assert!(text.contains("declines ldstmatrix"), "{text}");
    assert!(text.contains("`R` is not the m8n8 fragment of `A_smem`"), "{text}");
    assert!(text.contains("[fragment]"), "{text}");
    assert_eq!(rule(&calls[1], "ldstmatrix"), CopyRule::Fragment);
}

/// Two 8×16 stages in shared memory `stride` elements apart, loaded one after the
/// other into the same fragment (`symbolic`: the stage is the loop variable).
fn staged(stride: i64, symbolic: bool) -> String {
    let one = |s: &str, ind: &str| {
        format!(
            "{ind}Tx.warp.copy(R[0:8, 0:4, 0:2, 0:2], A_smem[{s}, 0:8, 0:4, 0:2, 0:2])\n{ind}for i in T.unroll(4):\n{ind}    B[{s}, tid // 4, tid % 4, i // 2, i % 2] = R_local[i]\n"
        )
    };
    let body = if symbolic {
        format!("    for s in range(2):\n{}", one("s", "        "))
    } else {
        one("0", "    ") + &one("1", "    ")
    };
    format!(
        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2, 8, 4, 2, 2), "float16")
    B = T.match_buffer(B_ptr, (2, 8, 4, 2, 2), "float16")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer((2, 8, 4, 2, 2), "float16", scope="shared", layout=TileLayout(S[(2, 8, 4, 2, 2):({stride}, 16, 2, 8, 1)]))
    R = T.alloc_buffer((8, 4, 2, 2), "float16", scope="local", layout=TileLayout(S[(8, 4, 2, 2):(4@laneid, 1@laneid, 2, 1)]))
    R_local = R.local()
    Tx.warp.copy(A_smem[0:2, 0:8, 0:4, 0:2, 0:2], A[0:2, 0:8, 0:4, 0:2, 0:2])
    T.cuda.cta_sync()
{body}"#
    )
}

/// Lowers and simulates a staged kernel (B == A); the records of the fragment loads.
fn run_staged(src: &str) -> Vec<CallExplain> {
    let l = lower(src);
    let a = pattern(DType::F16, 256);
    let mut params = vec![a.clone(), vec![0u8; 512]];
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &Default::default()) {
        panic!("{e:?}\n{}\n{src}", l.lir);
    }
    assert_eq!(params[1], a, "{}\n{src}", l.lir);
    l.explain[1..].to_vec()
}

#[test]
fn stage_offsets_constant_and_symbolic() {
    for symbolic in [false, true] {
        for c in run_staged(&staged(128, symbolic)) {
            assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{}", c.render());
        }
    }
    // Stages 132 elements (264 B) apart: the second starts off the 16-B grid.
    let calls = run_staged(&staged(132, false));
    assert_eq!(calls[0].chosen.as_deref(), Some("ldstmatrix"), "{}", calls[0].render());
    let (p, r) = decline_of(&calls[1]);
    assert_eq!(
        (p, r.as_str()),
        (CopyRule::Alignment.into(), "the shared region starts at element 132 (264 B), not 16-B aligned")
    );
    assert_eq!(calls[1].chosen.as_deref(), Some("reg"));
    let calls = run_staged(&staged(132, true));
    let (p, r) = decline_of(&calls[0]);
    assert_eq!(
        (p, r.as_str()),
        (CopyRule::Alignment.into(), "the symbolic region begin moves by 132 elements, not a multiple of 8 (16 B)")
    );
    assert_eq!(calls[0].chosen.as_deref(), Some("reg"));
}

#[test]
fn declines_sparse_register_pairs() {
    // Registers 2 apart: a column pair would straddle two 32-bit registers.
    let mut k = matrix_kernel("warp", 2, false, false, false);
    k.r = vec![(8, 4, "laneid"), (4, 1, "laneid"), (2, 4, ""), (2, 2, "")];
    let (p, c) = decline_of_script_and_explain(&k.script());
    assert_eq!(p, CopyRule::Fragment);
    assert!(c.contains("the two 16-bit elements of a column pair must be adjacent registers"), "{c}");
}

fn decline_of_script_and_explain(src: &str) -> (Rule, String) {
    let (calls, _) = tirx_lower::explain_kernel(&parse(src), &Default::default());
    let c = calls.iter().find(|c| c.operands.iter().any(|o| o.memory == "local")).expect("a register copy");
    decline_of(c)
}

/// The bundled examples: lowered to ldmatrix/stmatrix and correct in the simulator.
#[test]
fn examples() {
    let cases = [
        (
            include_str!("../../../examples/ldstmatrix_swizzle_x4.py"),
            2048,
            true,
            ["ldmatrix.sync.aligned.m8n8.x4.shared.b16", "stmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ),
        (
            include_str!("../../../examples/ldstmatrix_wg_trans.py"),
            2048,
            false,
            ["ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16"],
        ),
    ];
    for (src, n, doubled, instrs) in cases {
        let l = lower(src);
        let chosen: Vec<&str> = l.explain.iter().filter_map(|c| c.chosen.as_deref()).collect();
        assert_eq!(chosen.iter().filter(|c| **c == "ldstmatrix").count(), 2, "{chosen:?}");
        let cu = cuda(&l);
        for i in instrs {
            assert!(cu.contains(i), "{i}\n{cu}");
        }
        let a = pattern(DType::F16, n);
        let mut params = vec![a.clone(), vec![0u8; 2 * n]];
        tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
        for (i, (got, want)) in params[1].chunks(2).zip(a.chunks(2)).enumerate() {
            let want = u16::from_le_bytes([want[0], want[1]]);
            // Doubling a normal f16 adds one to its exponent.
            let want = if doubled { want + 0x0400 } else { want };
            assert_eq!(u16::from_le_bytes([got[0], got[1]]), want, "element {i}");
        }
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    /// A warp fragment of `o` row blocks × `n` column blocks whose registers
    /// are ordered by `order` (a permutation of row block, column block, element).
    fn kernel(o: i64, n: i64, order: [usize; 3], trans: bool, swizzle: bool, store: bool) -> Kernel {
        let ext = [o, n, 2];
        let mut stride = [0i64; 3];
        let mut acc = 1;
        for &d in order.iter().rev() {
            stride[d] = acc;
            acc *= ext[d];
        }
        // Row-major (8o × 8n) or its transpose stored row-major (8n × 8o).
        let s = if trans { [8, 1, 64 * o, 16 * o, 8 * o] } else { [64 * n, 8 * n, 8, 2, 1] };
        let j = |v: &[i64]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        let tile = format!("TileLayout(S[({o}, 8, {n}, 4, 2):({})])", j(&s));
        Kernel {
            scope: "warp",
            threads: 32,
            dtype: "float16",
            r: vec![(o, stride[0], ""), (8, 4, "laneid"), (n, stride[1], ""), (4, 1, "laneid"), (2, stride[2], "")],
            s_layout: if swizzle { format!("ComposeLayout(3, 3, 3, {tile})") } else { tile },
            store,
        }
    }

    /// 2 × 3 tiles: when the register order cannot group them in pairs, the shared order can.
    #[test]
    fn tiles_in_shared_order() {
        for (order, trans, num) in
            [([0, 1, 2], true, 2), ([1, 0, 2], true, 2), ([1, 0, 2], false, 2), ([0, 1, 2], false, 1)]
        {
            let k = kernel(2, 3, order, trans, false, false);
            let (_, c) = k.check();
            let reason = &tried(&c, "ldstmatrix").reason;
            assert!(
                reason.contains(&format!("num {num}, trans {trans}, {} instructions", 6 / num)),
                "{order:?} {trans}: {reason}"
            );
        }
    }

    const ORDERS: [[usize; 3]; 6] = [[0, 1, 2], [1, 0, 2], [0, 2, 1], [2, 0, 1], [1, 2, 0], [2, 1, 0]];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Any register order is copied correctly; ldstmatrix takes it exactly
        /// when the two elements of a column pair are adjacent registers.
        #[test]
        fn any_register_order(o in 1i64..4, n in 1i64..5, order in 0usize..6, trans: bool, swizzle: bool, store: bool) {
            let order = ORDERS[order];
            let k = kernel(o, n, order, trans, swizzle, store);
            let (l, c) = k.check();
            let pair_adjacent = k.r[4].1 == 1;
            if pair_adjacent {
                prop_assert_eq!(c.chosen.as_deref(), Some("ldstmatrix"), "{:?}\n{}", k, c.render());
                let reason = &tried(&c, "ldstmatrix").reason;
                let num = [4, 2, 1].into_iter().find(|m| reason.contains(&format!("num {m},"))).unwrap();
                prop_assert_eq!((o * n) % num, 0);
                prop_assert!(cuda(&l).contains(&ptx(store, num, trans)));
            } else {
                let (p, r) = decline_of(&c);
                prop_assert_eq!(p, CopyRule::Fragment, "{}", r);
                prop_assert_eq!(c.chosen.as_deref(), Some("reg"), "{}", c.render());
            }
        }
    }
}
