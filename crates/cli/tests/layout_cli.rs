//! `tirx layout`: every output form and the error path, run on the built binary.

use std::process::{Command, Output};

const TC: &str = "S[(8,2,4,2):(4@laneid,1@warpid,1@laneid,1)] + R[2:4@warpid] + 5@warpid";

fn tirx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirx")).arg("layout").args(args).output().expect("run tirx")
}

fn ok(args: &[&str]) -> String {
    let out = tirx(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn apply_prints_every_replica() {
    assert_eq!(ok(&[TC, "--shape", "8,16", "--apply", "7,15"]), "laneid=31 warpid=6 m=1\nlaneid=31 warpid=10 m=1\n");
}

#[test]
fn apply_json() {
    let text = ok(&[TC, "--shape", "8,16", "--apply", "7,15", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(v, serde_json::json!([{"laneid": 31, "warpid": 6, "m": 1}, {"laneid": 31, "warpid": 10, "m": 1}]));
}

#[test]
fn canonical_and_scope() {
    assert_eq!(
        ok(&[TC, "--canonical", "--scope"]),
        "S[(8, 2, 4, 2):(4@tx, 32@tx, 1@tx, 1)] + R[2:128@tx] + 160@tx\nscope: thread in cta\n"
    );
    assert_eq!(
        ok(&["S[(4,1):(1@laneid,1)] + 1@laneid + 2@warpid", "--canonical", "--fusion", "none"]),
        "S[4:1@laneid] + 1@laneid + 2@warpid\n"
    );
    assert_eq!(ok(&["S[(4,1):(1@laneid,1)] + 1@laneid + 2@warpid", "--canonical"]), "S[4:1@tx] + 65@tx\n");
}

#[test]
fn slice_prints_the_sliced_layout() {
    assert_eq!(ok(&["S[64, 64]", "--shape", "64,64", "--slice", "32:64,0:8"]), "S[(32, 8):(64, 1)] + 2048\n");
    assert_eq!(ok(&["S[(3,2,4):(100,10,1)]", "--slice", "6:10"]), "S[(2, 2):(88, 1)] + 12\n");
}

#[test]
fn table_shows_owner_and_slot() {
    let text = ok(&["S[(4,2):(1@laneid,1)]", "--shape", "4,2", "--table"]);
    assert_eq!(text, "      0    1\n0  T0:0 T0:1\n1  T1:0 T1:1\n2  T2:0 T2:1\n3  T3:0 T3:1\n");
    let tc = ok(&[TC, "--shape", "8,16", "--table"]);
    // Element (7, 15): lane 31 of warps 6 and 10, register 1 → tx 223 | 351.
    assert!(tc.lines().nth(8).unwrap().ends_with("T223:1|T351:1"), "{tc}");
}

#[test]
fn svg_is_written() {
    let path = std::env::temp_dir().join(format!("tirx-layout-{}.svg", std::process::id()));
    let p = path.to_str().unwrap();
    assert_eq!(ok(&["S[(4,2):(1@laneid,1)]", "--shape", "4,2", "--svg", p]), "");
    let svg = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<rect").count(), 8);
    assert!(svg.contains(">T3:1</text>"));
}

#[test]
fn bad_expression_points_at_the_character() {
    let out = tirx(&["S[(32,8):(1@lanid,1)]"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown axis `lanid`; valid axes: m, "), "{err}");
    assert!(err.contains("\n  S[(32,8):(1@lanid,1)]\n              ^"), "{err}");
}

#[test]
fn bad_shape_and_region_are_user_errors() {
    let out = tirx(&["S[8:1]", "--shape", "8,x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected a positive integer, found `x`\n  8,x\n    ^"));
    let out = tirx(&["S[8:1]", "--shape", "4,4"]);
    assert_eq!(out.status.code(), Some(1));
    let out = tirx(&["S[(4,4):(10,1)]", "--slice", "2:8"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not expressible"));
}

#[test]
fn script_methods_and_helpers_in_the_expression() {
    assert_eq!(
        ok(&["ComposeLayout(3,3,3,TileLayout(S[8,64])).tile_to((16,128),(8,64)).tile_to((32,256),(16,128))"]),
        "ComposeLayout(3, 3, 3, S[(2, 2, 8, 2, 2, 64):(4096, 1024, 64, 2048, 512, 1)])\n"
    );
    // Row 9, column 70: tile address 9·64 + 4096 + 6 = 4678, swizzled (chunk 584 ^ 1) to 4686.
    assert_eq!(
        ok(&["mma_shared_layout(\"float16\", 3, (64, 256))", "--shape", "64,256", "--apply", "9,70"]),
        "m=4686\n"
    );
    assert_eq!(
        ok(&["tcgen05_atom_layout(\"16x256b\", (64, 64), \"float32\")", "--shape", "64,64", "--apply", "19,13"]),
        "laneid=14 wid_in_wg=1 m=5\n"
    );
    assert_eq!(ok(&["TileLayout(S[(8, 8):(8, 1)]).group([4, 16])[0]"]), "S[(4, 2, 8):(16, 8, 1)]\n");
}

#[test]
fn script_expression_errors_point_at_the_argument() {
    let out = tirx(&["S[(8, 8):(8, 1)].tile_to((60, 64), (8, 8))"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("tile_to: `shape` dimension 0 (60) is not a multiple of the atom extent 8"), "{err}");
    assert!(err.contains("EXPR:1:26"), "{err}");
    assert!(err.contains("help: make every dimension of `shape` a multiple"), "{err}");
    let out = tirx(&["S[8:1].size()"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected a layout, found an int"));
}
