//! Random small kernels never panic the simulator: every outcome is a report or a typed error.
mod common;
use common::*;
use proptest::prelude::*;
use tirx_ir::hir::{MathFn, UnOp};
use tirx_ir::lir::{LBinOp, LBufId, LExpr, LStmt, LStmtKind, LVarId, MatrixDir, MatrixMove, MatrixOp};
use tirx_ir::DType;
use tirx_sim::{simulate, SimOptions};

const TYPES: [DType; 8] =
    [DType::I8, DType::I32, DType::I64, DType::U32, DType::F16, DType::BF16, DType::F32, DType::F8E4M3];

const ARITH: [LBinOp; 9] = [
    LBinOp::Add,
    LBinOp::Sub,
    LBinOp::Mul,
    LBinOp::Div,
    LBinOp::Rem,
    LBinOp::FloorDiv,
    LBinOp::FloorMod,
    LBinOp::Min,
    LBinOp::Max,
];
const BITS: [LBinOp; 5] = [LBinOp::BitAnd, LBinOp::BitOr, LBinOp::BitXor, LBinOp::Shl, LBinOp::Shr];
const CMP: [LBinOp; 6] = [LBinOp::Eq, LBinOp::Ne, LBinOp::Lt, LBinOp::Le, LBinOp::Gt, LBinOp::Ge];

/// Buffers: 0 = G (global i32 × 64), 1 = S (shared f16 × 64), 2 = R (local f16 × 8). Vars 0..3 are i32.
const BUF_TYPES: [DType; 3] = [DType::I32, DType::F16, DType::F16];

/// A well-typed expression of type `t` (so the LIR validator lets it through to the executor).
fn expr_of(t: DType, depth: u32) -> BoxedStrategy<LExpr> {
    let leaf = if t.is_float() {
        (-1e4f64..1e4).prop_map(move |x| flt(x, t)).boxed()
    } else {
        prop_oneof![
            (-70i64..70).prop_map(move |v| typed(v, t)),
            Just(cast(t, tid())),
            Just(cast(t, bid())),
            (0u32..3).prop_map(move |v| cast(t, LExpr::Var(LVarId(v)))),
        ]
        .boxed()
    };
    if depth == 0 {
        return leaf;
    }
    let sub = move |t: DType| expr_of(t, depth - 1);
    let mut options = vec![
        leaf,
        (prop::sample::select(ARITH.to_vec()), sub(t), sub(t)).prop_map(|(o, a, b)| bin(o, a, b)).boxed(),
        (0usize..TYPES.len()).prop_flat_map(move |u| sub(TYPES[u]).prop_map(move |a| cast(t, a))).boxed(),
        (cond(depth - 1), sub(t), sub(t)).prop_map(|(c, a, b)| select(c, a, b)).boxed(),
        sub(t).prop_map(|a| un(UnOp::Neg, a)).boxed(),
        (0u32..3, sub(DType::I32)).prop_map(move |(b, i)| cast(t, load(LBufId(b), i))).boxed(),
    ];
    if t.is_float() {
        options.push(sub(t).prop_map(|a| math(MathFn::Sqrt, a)).boxed());
    } else {
        options.push((prop::sample::select(BITS.to_vec()), sub(t), sub(t)).prop_map(|(o, a, b)| bin(o, a, b)).boxed());
        options.push(sub(t).prop_map(|a| un(UnOp::BitNot, a)).boxed());
    }
    prop::strategy::Union::new(options).boxed()
}

fn cond(depth: u32) -> BoxedStrategy<LExpr> {
    (0usize..TYPES.len(), prop::sample::select(CMP.to_vec()))
        .prop_flat_map(move |(t, o)| {
            (expr_of(TYPES[t], depth), expr_of(TYPES[t], depth)).prop_map(move |(a, b)| bin(o, a, b))
        })
        .boxed()
}

fn index() -> BoxedStrategy<LExpr> {
    expr_of(DType::I32, 2)
}

fn stmt() -> impl Strategy<Value = LStmt> {
    let leaf = prop_oneof![
        (0u32..3, index()).prop_flat_map(
            |(b, i)| expr_of(BUF_TYPES[b as usize], 2).prop_map(move |v| at(1, store(LBufId(b), i.clone(), v)))
        ),
        Just(at(3, cta_sync())),
        Just(at(4, warp_sync())),
        (index(), index(), prop::sample::select(vec![1u32, 2, 4, 8]), any::<bool>()).prop_map(|(d, s, lanes, up)| {
            let (dst, src) = if up { (LBufId(1), LBufId(2)) } else { (LBufId(2), LBufId(1)) };
            at(5, vcopy(dst, d, src, s, lanes))
        }),
        (index(), any::<bool>(), prop::sample::select(vec![1u8, 2, 4]), any::<bool>()).prop_map(
            |(i, trans, num, st)| {
                let (smem, smem_index, regs, reg_index) =
                    (LBufId(1), i, LBufId(2), (0..num as i64).map(|r| int(2 * r)).collect());
                at(
                    6,
                    if st {
                        LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
                            dir: MatrixDir::Store,
                            num,
                            trans,
                            smem,
                            smem_index,
                            regs,
                            reg_index,
                        }))
                    } else {
                        LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
                            dir: MatrixDir::Load,
                            num,
                            trans,
                            smem,
                            smem_index,
                            regs,
                            reg_index,
                        }))
                    },
                )
            }
        ),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            (cond(1), prop::collection::vec(inner.clone(), 0..3)).prop_map(|(c, body)| at(7, if_(c, body))),
            (3u32..9, 0i64..4, prop::collection::vec(inner, 0..3))
                .prop_map(|(v, n, body)| at(8, for_(LVarId(v), n, body))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn random_kernels_never_panic(body in prop::collection::vec(stmt(), 1..6), grid in 1u32..3, block in prop::sample::select(vec![1u32, 16, 32, 64])) {
        let mut kb = Kb::new([grid, 1, 1], [block, 1, 1]);
        kb.param("G", DType::I32, 64);
        kb.shared("S", DType::F16, 64);
        kb.local("R", DType::F16, 8);
        for i in 0..9 {
            kb.var(&format!("v{i}"), DType::I32);
        }
        // Vars 0..3 are set up front so expressions may use them.
        let mut stmts: Vec<LStmt> = (0..3).map(|v| at(0, let_(LVarId(v), int(v as i64)))).collect();
        stmts.extend(body);
        let k = kb.finish(stmts);
        for opts in [SimOptions::default(), SimOptions { check_races: false, stats: true, ..Default::default() }] {
            let mut params = vec![vec![0u8; 256]];
            let _ = simulate(&k, &mut params, &opts);
            prop_assert_eq!(params[0].len(), 256, "parameters are handed back whole");
        }
    }
}
