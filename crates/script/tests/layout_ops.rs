//! Layout methods and helpers in scripts (docs/layout-model.md §2.14): each
//! script value equals the `tirx_layout` call it names, results that are not
//! layouts (separators, sizes, `apply` dicts, atom shapes) reach the kernel as
//! buffer shapes, and every kernel round-trips through the printer.

use tirx_ir::diag::line_col;
use tirx_ir::hir::Kernel;
use tirx_layout::{
    mma_atom_layout, mma_shared_layout, parse_layout, tcgen05_atom_layout, wg_local_layout, Fusion, Layout,
    SwizzleMode, Tcgen05Shape, TileLayout,
};

const HEAD: &str = "\
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, ComposeLayout, Iter, Axis, laneid, warpid, tid_in_wg, wid_in_wg, m
from tvm.tirx.layout import tcgen05_atom_layout, wg_local_layout, mma_shared_layout, mma_atom_layout, mma_atom_shape
from tvm.tirx.cuda.tile_primitive.tma_utils import SwizzleMode
";

/// A kernel with `consts` at module level and one `alloc_local` per `(name, shape, layout)`.
fn kernel(consts: &str, bufs: &[(&str, &str, &str)]) -> Kernel {
    let mut src = format!(
        "{HEAD}{consts}\n@T.prim_func\ndef k(A_ptr: T.handle):\n    A = T.match_buffer(A_ptr, (64, 8), \"float32\")\n    \
         T.device_entry(); T.cta_id([1]); T.warp_id([4]); T.lane_id([32]); tid = T.thread_id([128])\n"
    );
    for (name, shape, layout) in bufs {
        src.push_str(&format!("    {name} = T.alloc_local({shape}, \"float32\", layout={layout})\n"));
    }
    let k = tirx_script::parse_kernel("t.py", &src)
        .unwrap_or_else(|d| panic!("{}", tirx_ir::diag::render(&d, "t.py", &src, false)));
    let printed = tirx_script::print_kernel(&k);
    let again = tirx_script::parse_kernel("printed.py", &printed)
        .unwrap_or_else(|d| panic!("{}\n{printed}", tirx_ir::diag::render(&d, "printed.py", &printed, false)));
    assert!(tirx_script::same_kernel(&k, &again), "round trip differs:\n{printed}");
    k
}

fn buffer(k: &Kernel, name: &str) -> (Vec<i64>, Layout) {
    let b = k.buffers.iter().find(|b| b.name == name).expect("buffer");
    (b.shape.clone(), b.layout.clone())
}

fn layout_of(k: &Kernel, name: &str) -> Layout {
    buffer(k, name).1
}

fn shape_of(k: &Kernel, name: &str) -> Vec<i64> {
    buffer(k, name).0
}

fn tile(src: &str) -> TileLayout {
    match parse_layout(src) {
        Ok(Layout::Tile(t)) => t,
        other => panic!("{src}: {other:?}"),
    }
}

#[test]
fn tile_to_chains_on_specs_tiles_and_swizzles() {
    let k = kernel(
        "A_FRAG = S[(2,8,4,2):(2, 4@laneid, 1@laneid, 1)].tile_to([16,16],[16,8])\n\
         B_FRAG = TileLayout(S[(4,2,8):(1@laneid, 1, 4@laneid)]).tile_to(to_shape=[16,8], current_shape=[8,8])\n\
         SW = ComposeLayout(3,3,3,TileLayout(S[8,64])).tile_to((16,128),(8,64)).tile_to((32,256),(16,128))\n",
        &[("a", "(16, 16)", "A_FRAG"), ("b", "(16, 8)", "B_FRAG"), ("s", "(32, 256)", "SW")],
    );
    let a = tile("S[(2,8,4,2):(2, 4@laneid, 1@laneid, 1)]").tile_to(&[16, 16], &[16, 8], Fusion::None).unwrap();
    assert_eq!(layout_of(&k, "a"), Layout::Tile(a));
    assert_eq!(layout_of(&k, "b").to_string(), "S[(2, 4, 2, 8):(2, 1@laneid, 1, 4@laneid)]");
    assert_eq!(
        layout_of(&k, "s").to_string(),
        "ComposeLayout(3, 3, 3, S[(2, 2, 8, 2, 2, 64):(4096, 1024, 64, 2048, 512, 1)])"
    );
}

#[test]
fn group_permute_and_the_other_methods() {
    let k = kernel(
        "L = TileLayout(S[(8, 8):(8, 1)])\n\
         T2 = L.tile(L, [8, 8], [8, 8])\n\
         G, SEPS = T2.group([64, 64])\n\
         KM = G.permute_by_groups(SEPS, [1, 0])\n\
         PD = G.permute_dims((3, 2, 1, 0))\n\
         GM, GSEPS = TileLayout(S[30:1]).group_many([[6, 5], [2, 15]])\n\
         C = TileLayout(S[(4, 8):(8, 1)]).canonicalize()\n\
         SL = TileLayout(S[(32, 8):(1@laneid, 1)]).slice((32, 8), [(16, 32), slice(0, 8)])\n\
         ST = TileLayout(S[(32, 8):(1@laneid, 1)] + 2@warpid + 8).storage()\n\
         N = T2.size()\n\
         NL = SL.size(axis_name=\"laneid\")\n\
         NM = SL.size(axis=m)\n\
         SPAN = ST.span()\n\
         AP = TileLayout(S[(32, 8):(1@laneid, 1)]).apply(9, 5, shape=(32, 8))\n\
         SWZ = ComposeLayout(3, 3, 3, S[512:1])\n\
         SW1 = SWZ.apply(9 * 64 + 8, shape=(64, 64))[\"m\"]\n\
         SW2 = SWZ.apply(9, 8, shape=(64, 64))[\"m\"]\n",
        &[
            ("km", "(64, 64)", "KM"),
            ("pd", "(8, 8, 8, 8)", "PD"),
            ("gm", "30", "GM"),
            ("c", "32", "C"),
            ("sl", "(16, 8)", "SL"),
            ("st", "(8,)", "ST"),
            ("seps", "tuple(s + 1 for s in SEPS)", "None"),
            ("gseps", "(*[s + 1 for s in GSEPS[0]], *[s + 1 for s in GSEPS[1]])", "None"),
            ("sizes", "(N, NL, SPAN, NM)", "None"),
            ("ap", "(AP[\"laneid\"] + 1, AP[\"m\"] + 1)", "None"),
            ("swz", "(SW1, SW2)", "None"),
        ],
    );
    let l = tile("S[(8, 8):(8, 1)]");
    let t2 = l.tile(&l, &[8, 8], &[8, 8], Fusion::None).unwrap();
    let (g, seps) = t2.group(&[64, 64]).unwrap();
    assert_eq!(layout_of(&k, "km"), Layout::Tile(g.permute_by_groups(&seps, &[1, 0]).unwrap()));
    assert_eq!(layout_of(&k, "pd"), Layout::Tile(g.permute_dims(&[3, 2, 1, 0]).unwrap()));
    assert_eq!(layout_of(&k, "gm").to_string(), "S[(2, 3, 5):(15, 5, 1)]");
    assert_eq!(layout_of(&k, "c").to_string(), "S[32:1]");
    assert_eq!(layout_of(&k, "sl").to_string(), "S[(16, 8):(1@laneid, 1)] + 16@laneid");
    assert_eq!(layout_of(&k, "st").to_string(), "S[8:1] + 8");
    assert_eq!(shape_of(&k, "seps"), vec![1, 3, 5]);
    assert_eq!(shape_of(&k, "gseps"), vec![1, 3, 4, 1, 2, 4]);
    // size() counts every shard iter, size("laneid") the laneid ones, span() memory only (+ offset).
    assert_eq!(shape_of(&k, "sizes"), vec![4096, 16, 16, 8]);
    assert_eq!(shape_of(&k, "ap"), vec![10, 6]);
    // The bare swizzle over 64×64: address 584, chunk 73 ^ (73 >> 3 & 7 = 1) = 72 → 576.
    assert_eq!(shape_of(&k, "swz"), vec![576, 576]);
}

#[test]
fn layout_attributes_iters_and_from_iters() {
    let k = kernel(
        "FI = TileLayout.from_iters([Iter(128, 1, tid_in_wg), Iter(8, 1, \"m\")], [], {m: 0})\n\
         CP = TileLayout.from_iters(shard=FI.shard, offset={\"m\": 4, Axis.get(\"m\"): 0})\n\
         SW = ComposeLayout(3, 2, 3, S[(8, 32)])\n\
         T3 = SW.tile_layout\n\
         P = (SW.per_element + 1, SW.swizzle_len + 1, SW.atom_len + 1)\n\
         X = (FI.shard[0].extent, FI.shard[1].stride + 1, len(FI.offset), len(T3.shard))\n\
         NAMES = FI.shard[0].axis.name\n",
        &[
            ("fi", "(128, 8)", "FI"),
            ("cp", "(128, 8)", "CP"),
            ("t3", "(8, 32)", "T3"),
            ("p", "P", "None"),
            ("x", "X", "None"),
            ("names", "len(NAMES)", "None"),
        ],
    );
    assert_eq!(layout_of(&k, "fi").to_string(), "S[(128, 8):(1@tid_in_wg, 1)] + 0");
    // `{"m": 4, Axis.get("m"): 0}`: both keys name `m`, the later wins (as the reference's from_iters).
    assert_eq!(layout_of(&k, "cp").to_string(), "S[(128, 8):(1@tid_in_wg, 1)] + 0");
    assert_eq!(layout_of(&k, "t3").to_string(), "S[(8, 32):(32, 1)]");
    assert_eq!(shape_of(&k, "p"), vec![4, 3, 4]);
    assert_eq!(shape_of(&k, "x"), vec![128, 2, 1, 2]);
    assert_eq!(shape_of(&k, "names"), vec!["tid_in_wg".len() as i64]);
}

#[test]
fn mma_and_tcgen05_helpers() {
    let k = kernel(
        "MMA = mma_shared_layout(\"float16\", SwizzleMode.SWIZZLE_128B_ATOM, (64, 256))\n\
         MMA0 = mma_shared_layout(T.float32, 0, (64, 64))\n\
         ATOM = mma_atom_layout(\"float16\", 3)\n\
         ASHAPE = mma_atom_shape(\"float16\", 3)\n\
         ASHAPE3 = mma_atom_shape(\"float32\", 2, (2, 64, 64))\n\
         TC = tcgen05_atom_layout(\"16x256b\", (64, 64), \"float32\")\n\
         TC16 = tcgen05_atom_layout(\"16x128b\", (128, 64), \"bfloat16\")\n\
         WG = wg_local_layout(16)\n",
        &[
            ("mma", "(64, 256)", "MMA"),
            ("mma0", "(64, 64)", "MMA0"),
            ("atom", "(8, 64)", "ATOM"),
            ("ashape", "ASHAPE", "None"),
            ("ashape3", "ASHAPE3", "None"),
            ("tc", "(64, 64)", "TC"),
            ("tc16", "(128, 64)", "TC16"),
            ("wg", "(128, 16)", "WG"),
        ],
    );
    assert_eq!(layout_of(&k, "mma"), mma_shared_layout(16, SwizzleMode::B128, &[64, 256]).unwrap());
    assert_eq!(layout_of(&k, "mma").to_string(), "ComposeLayout(3, 3, 3, S[(64, 4, 64):(64, 4096, 1)])");
    assert_eq!(layout_of(&k, "mma0"), mma_shared_layout(32, SwizzleMode::None, &[64, 64]).unwrap());
    assert_eq!(layout_of(&k, "atom"), Layout::Compose(mma_atom_layout(16, SwizzleMode::B128).unwrap()));
    assert_eq!(shape_of(&k, "ashape"), vec![8, 64]);
    assert_eq!(shape_of(&k, "ashape3"), vec![1, 8, 16]);
    assert_eq!(layout_of(&k, "tc"), Layout::Tile(tcgen05_atom_layout(Tcgen05Shape::S16x256b, 64, 64, 32).unwrap()));
    assert_eq!(layout_of(&k, "tc16"), Layout::Tile(tcgen05_atom_layout(Tcgen05Shape::S16x128b, 128, 64, 16).unwrap()));
    assert_eq!(layout_of(&k, "wg"), Layout::Tile(wg_local_layout(16, 128).unwrap()));
}

#[test]
fn offset_only_layouts_print_and_reparse() {
    // storage() of a thread-only layout keeps only its memory offset: S[()] + 3 prints that way.
    let k = kernel(
        "ST = TileLayout(S[32:1@laneid] + 3).storage()\nNEG = TileLayout(S[32:1@laneid] - 3).storage()\n",
        &[("st", "(1,)", "ST"), ("neg", "(1,)", "NEG")],
    );
    assert_eq!(layout_of(&k, "st").to_string(), "3");
    assert_eq!(layout_of(&k, "neg").to_string(), "-3");
}

/// `(message part, line in consts, column, help part)` of the first error of a module.
fn error_at(consts: &str) -> (String, usize, usize, String) {
    let src = format!("{HEAD}{consts}");
    let diags = match tirx_script::parse_kernel("e.py", &src) {
        Ok(_) => panic!("no error for\n{consts}"),
        Err(d) => d,
    };
    let d = &diags[0];
    let (line, col) = line_col(&src, d.span().lo as usize);
    (d.message.clone(), line - HEAD.lines().count(), col, d.help.clone().unwrap_or_default())
}

#[test]
fn errors_point_at_the_argument_with_a_fix() {
    let cases: &[(&str, &str, usize, usize, &str)] = &[
        (
            "X = TileLayout(S[(8, 8):(8, 1)]).tile_to((60, 64), (8, 8))\n",
            "tile_to: `shape` dimension 0 (60) is not a multiple of the atom extent 8",
            1,
            42,
            "multiple of `atom_shape`",
        ),
        (
            "X = TileLayout(S[(8, 8):(8, 1)]).tile_to((64, 64), (4, 4))\n",
            "tile_to(): layout with shard extents [64] does not admit shape [4, 4]",
            1,
            52,
            "`L.size()`",
        ),
        (
            "X = TileLayout(S[12:1]).group_many([[3, 4], [2, 6]])\n",
            "incompatible cumulative boundaries",
            1,
            36,
            "cumulative products",
        ),
        (
            "G, SEPS = TileLayout(S[(8, 8):(8, 1)]).group([8, 8])\nX = G.permute_by_groups(SEPS, [0, 0])\n",
            "[0, 0] is not a permutation of 0..2",
            2,
            31,
            "exactly once",
        ),
        (
            "X = TileLayout(S[(32, 8):(1@laneid, 1)]).slice((32, 8), [(0, 40), (0, 8)])\n",
            "region [0, 40) in dimension 0",
            1,
            57,
            "(begin, end)",
        ),
        (
            "X = ComposeLayout(3, 3, 3, S[512]).group([8, 64])\n",
            "`group` is a TileLayout method",
            1,
            5,
            "L.tile_layout.group",
        ),
        (
            "X = mma_shared_layout(\"float16\", 3, (60, 256))\n",
            "mma_shared_layout: `shape` [60, 256] does not split into 128-byte swizzle atoms",
            1,
            37,
            "mma_atom_shape",
        ),
        (
            "X = mma_shared_layout(\"float16\", 5, (64, 256))\n",
            "swizzle mode 5 does not exist",
            1,
            34,
            "SWIZZLE_128B_ATOM",
        ),
        (
            "X = tcgen05_atom_layout(\"16x256b\", (64, 512), \"float32\")\n",
            "`tensor_shape` has 512 columns",
            1,
            36,
            "the values the message lists",
        ),
        (
            "X = tcgen05_atom_layout(\"16x265b\", (64, 64), \"float32\")\n",
            "unknown tcgen05 atom shape",
            1,
            25,
            "\"16x256b\"",
        ),
        (
            "X = TileLayout.from_iters([Iter(32, 1, laneid), Iter(4, 32, \"tx\")])\n",
            "conflicting thread axes",
            1,
            5,
            "one scope chain",
        ),
        ("X = Iter(0, 1, laneid)\n", "expected a positive extent, found 0", 1, 10, ""),
        (
            "X = TileLayout(S[8:1]).tile_too((8,), (8,))\n",
            "a TileLayout has no attribute `tile_too`",
            1,
            24,
            "did you mean `tile_to`?",
        ),
        ("X = TileLayout(S[8:1]).apply(1)[\"laneid\"]\n", "key \"laneid\" is not in the dict", 1, 33, ""),
        ("X = SwizzleMode.SWIZZLE_128B\n", "`SwizzleMode` has no member `SWIZZLE_128B`", 1, 17, "SWIZZLE_128B_ATOM"),
    ];
    let mut failures = vec![];
    for &(consts, message, line, col, help) in cases {
        let got = error_at(consts);
        if !(got.0.contains(message) && (got.1, got.2) == (line, col) && got.3.contains(help)) {
            failures.push(format!("{consts}  want `{message}` at {line}:{col} help `{help}`\n  got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
