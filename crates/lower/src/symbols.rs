//! [`Symbols`]: what lowering knows of the values a launch decides — per
//! scalar parameter its LIR variable, range, divisor and `T.assume` facts, and
//! the grid dims that are expressions of them (the facts are derived in
//! `launch`).

use crate::affine::Affine;
use std::collections::HashMap;
use tirx_ir::hir::VarId;
use tirx_ir::lir::{LVarId, SymExpr};
use tirx_ir::DType;

/// What is known of one scalar parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamInfo {
    pub lv: LVarId,
    pub name: String,
    pub dtype: DType,
    /// Inclusive range from its type, `T.assume` and the launch's implicit facts.
    pub lo: Option<i64>,
    pub hi: Option<i64>,
    /// Every value is a multiple of this (`T.assume(n % 64 == 0)`); 1 when nothing is known.
    pub unit: i64,
    /// The `T.assume` conditions that mention it, as written.
    pub facts: Vec<String>,
}

/// Scalar parameters and symbolic grid dims of the kernel being lowered.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    pub params: HashMap<VarId, ParamInfo>,
    /// Per grid dim: its expression in the parameters when symbolic (`None` for a
    /// constant dim); the affine form when it has one.
    pub grid: [Option<SymGrid>; 3],
}

/// A grid dim that is a run-time value.
#[derive(Clone, Debug)]
pub struct SymGrid {
    pub expr: SymExpr,
    pub affine: Option<Affine>,
    pub text: String,
}

impl Symbols {
    pub fn is_param(&self, v: VarId) -> bool {
        self.params.contains_key(&v)
    }

    /// `n` for a parameter's LIR variable.
    pub fn name_of(&self, lv: LVarId) -> String {
        self.params.values().find(|p| p.lv == lv).map_or_else(|| format!("var#{}", lv.0), |p| p.name.clone())
    }

    pub fn text(&self, e: &SymExpr) -> String {
        e.text(&|v| self.name_of(v))
    }

    /// The unit (known divisor) of variable `v`: a parameter's from `T.assume`, else 1.
    pub fn unit(&self, v: VarId) -> i64 {
        self.params.get(&v).map_or(1, |p| p.unit)
    }
}
