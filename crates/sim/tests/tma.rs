//! TMA copies of hand-built kernels: element sizes that differ between the map,
//! the global buffer and the shared buffer, map geometry at the typing limits,
//! and the checker's element-size rule for maps.
mod common;
use common::*;
use tirx_ir::lir::{AsyncOp, LBufId, LKernel, LStmtKind, Mbar, SymExpr, TensorMap, TmaCopy, TmapDtype, TmapId};
use tirx_ir::DType;
use tirx_sim::{simulate, SimErrorKind, SimOptions};

fn map(buf: LBufId, dtype: TmapDtype, dims: &[i64], strides: &[i64], boxes: &[u32]) -> TensorMap {
    TensorMap {
        name: "A_tmap".into(),
        buf,
        dtype,
        base_offset: 0,
        dims: dims.iter().map(|&d| SymExpr::Int(d)).collect(),
        strides: strides.iter().map(|&s| SymExpr::Int(s)).collect(),
        boxes: boxes.to_vec(),
        elem_strides: vec![1; dims.len()],
        swizzle: 0,
        l2_promotion: 0,
        oob_nan: false,
    }
}

/// 128 threads: thread 0 loads the box of `m` at `coords` into `S` (`s_dtype`,
/// `s_elems`) on `bar[0]` expecting `bytes`; everyone waits, then thread `i`
/// copies `S[i]` to `B[i]` (`B` of `s_dtype`, `s_elems`).
fn load_kernel(
    a: (DType, i64),
    s: (DType, i64),
    m: impl Fn(LBufId) -> TensorMap,
    coords: Vec<i64>,
    bytes: i64,
) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [128, 1, 1]);
    let a = kb.param("A", a.0, a.1);
    let b = kb.param("B", s.0, s.1);
    let sm = kb.shared("S", s.0, s.1);
    let bars = kb.shared("bar", DType::I64, 1);
    kb.k.tmaps.push(m(a));
    let bar = || Mbar { buf: bars, index: int(0) };
    let copy = TmaCopy {
        map: TmapId(0),
        coords: coords.into_iter().map(int).collect(),
        smem: sm,
        smem_index: int(0),
        bar: Some(bar()),
        multicast: None,
        cache: None,
        reduce: None,
    };
    kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(2, LStmtKind::Async(AsyncOp::MbarInit { bar: bar(), count: int(1) }))])),
        at(3, cta_sync()),
        at(
            4,
            if_(
                lt(tid(), int(1)),
                vec![
                    at(5, LStmtKind::Async(AsyncOp::MbarArriveExpectTx { bar: bar(), bytes: int(bytes) })),
                    at(6, LStmtKind::Async(AsyncOp::TmaLoad(copy))),
                ],
            ),
        ),
        at(7, LStmtKind::Async(AsyncOp::MbarWait { bar: bar(), parity: int(0) })),
        at(8, if_(lt(tid(), int(s.1)), vec![at(9, store(b, tid(), load(sm, tid())))])),
    ])
}

#[test]
fn a_map_of_f32_over_f32_global_loads_into_f16_shared_byte_for_byte() {
    // The map's element is one global f32 but two shared f16s: 64 elements, 256 bytes.
    let k =
        load_kernel((DType::F32, 64), (DType::F16, 128), |a| map(a, TmapDtype::F32, &[64], &[], &[64]), vec![0], 256);
    // Distinct f16 bit patterns, none a NaN (the store converts through the value).
    let a: Vec<u8> = (0..128u16).flat_map(|i| (i * 3 + 1).to_le_bytes()).collect();
    let mut params = vec![a.clone(), vec![0u8; 256]];
    simulate(&k, &mut params, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(params[1], a);
}

#[test]
fn a_box_whose_global_offset_overflows_i64_is_out_of_bounds() {
    // Dims 2^32 and strides just below 2^40 (the typing limits): the box at coordinate
    // 2^31 - 1 of the two outer dims lies about 2^71 bytes in.
    let stride = (1i64 << 40) - 16;
    let k = load_kernel(
        (DType::F32, 64),
        (DType::F32, 4),
        |a| map(a, TmapDtype::F32, &[1 << 32; 3], &[stride, stride], &[4, 1, 1]),
        vec![0, i64::from(i32::MAX), i64::from(i32::MAX)],
        16,
    );
    let mut params = vec![vec![0u8; 256], vec![0u8; 16]];
    let e = simulate(&k, &mut params, &SimOptions::default()).expect_err("the box is far outside `A`");
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{e}");
    assert!(e.message.contains("TMA global box"), "{e}");
}

#[test]
fn a_map_element_narrower_than_the_global_buffers_is_rejected() {
    let k =
        load_kernel((DType::F32, 64), (DType::F16, 128), |a| map(a, TmapDtype::F16, &[128], &[], &[128]), vec![0], 256);
    let e = k.validate().expect_err("an f16 map over an f32 buffer");
    assert!(e.contains("is not a whole number of `A`'s"), "{e}");
}
