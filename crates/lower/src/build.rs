//! The LIR under construction: buffer and variable tables with readable unique
//! names, value ranges of variables, and folding expression constructors.
//!
//! Ranges let the constructors drop what cannot matter (`tx % 32` in a 32-thread
//! block is `tx`, `(tid * 4) / 128` for `tid < 32` is `0`) so the generated CUDA
//! reads like hand-written code.

use std::collections::HashMap;
use tirx_ir::lir::{LBinOp, LBuf, LBufId, LExpr, LStmt, LVar, LVarId, Special, TensorMap, TmapId};
use tirx_ir::DType;

/// Hardware-derived thread/CTA ids, each declared once as a kernel-level `let`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hw {
    /// Linear thread index in the CTA.
    Tx,
    Lane,
    TidInWg,
    WarpId,
    WgId,
    WarpInWg,
    ThreadIdx(u8),
    BlockIdx(u8),
    /// `%cluster_ctaid.d`: `blockIdx.d % cluster[d]` (the grid is a whole number of clusters).
    ClusterCta(u8, u32),
    /// `%clusterid.d`: `blockIdx.d / cluster[d]`.
    ClusterIdx(u8, u32),
}

/// Inclusive value bounds.
pub type Bounds = (i64, i64);

#[derive(Default)]
pub struct Builder {
    pub bufs: Vec<LBuf>,
    pub vars: Vec<LVar>,
    ranges: HashMap<LVarId, Bounds>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Kernel-level lets of hardware ids, in declaration order.
    pub prelude: Vec<LStmt>,
    pub hw_vars: HashMap<Hw, LVarId>,
    /// TMA descriptors, one per distinct map the copies use (`copy_async::tma`).
    pub tmaps: Vec<TensorMap>,
}

impl Builder {
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> Builder {
        Builder { grid, block, ..Default::default() }
    }

    /// The tensor map equal to `m` (its name aside), else `m` added as a new one named
    /// `{buffer}_tmap` (then `_1`, `_2`, ...).
    pub fn tmap(&mut self, mut m: TensorMap) -> TmapId {
        let same = |x: &TensorMap| TensorMap { name: String::new(), ..x.clone() };
        let key = same(&m);
        if let Some(i) = self.tmaps.iter().position(|x| same(x) == key) {
            return TmapId(i as u32);
        }
        let base = format!("{}_tmap", self.bufs[m.buf.0 as usize].name);
        let taken = |n: &str| self.tmaps.iter().any(|x| x.name == n);
        m.name =
            if taken(&base) { (1..).map(|i| format!("{base}_{i}")).find(|n| !taken(n)).unwrap_or(base) } else { base };
        self.tmaps.push(m);
        TmapId(self.tmaps.len() as u32 - 1)
    }

    pub fn add_buf(&mut self, b: LBuf) -> LBufId {
        self.bufs.push(b);
        LBufId(self.bufs.len() as u32 - 1)
    }

    /// A fresh variable named as in the source; the CUDA printer makes names
    /// unique per scope, so sibling loops can all be called `f`.
    pub fn var(&mut self, name: &str, dtype: DType, range: Option<Bounds>) -> LVarId {
        let unique = if name.is_empty() { "v".to_string() } else { name.to_string() };
        self.vars.push(LVar { name: unique, dtype });
        let id = LVarId(self.vars.len() as u32 - 1);
        if let Some(r) = range {
            self.ranges.insert(id, r);
        }
        id
    }

    /// Sets the known range of a variable declared without one (a scalar parameter
    /// once its facts are known).
    pub fn set_range(&mut self, v: LVarId, r: Bounds) {
        self.ranges.insert(v, r);
    }

    /// Bounds of an integer expression, when known.
    pub fn bounds(&self, e: &LExpr) -> Option<Bounds> {
        match e {
            LExpr::Int(v, _) => Some((*v, *v)),
            LExpr::Var(v) => self.ranges.get(v).copied(),
            LExpr::Special(Special::ThreadIdx(d)) => Some((0, self.block[*d as usize] as i64 - 1)),
            LExpr::Special(Special::BlockIdx(d)) => Some((0, self.grid[*d as usize] as i64 - 1)),
            LExpr::Cast(t, a) if t.is_int() => self.bounds(a),
            LExpr::Bin(op, a, b) => {
                let (al, ah) = self.bounds(a)?;
                let (bl, bh) = self.bounds(b)?;
                match op {
                    LBinOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                    LBinOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                    LBinOp::Mul => {
                        let c = [al.checked_mul(bl)?, al.checked_mul(bh)?, ah.checked_mul(bl)?, ah.checked_mul(bh)?];
                        Some((*c.iter().min()?, *c.iter().max()?))
                    }
                    LBinOp::Div | LBinOp::FloorDiv if bl == bh && bl > 0 && al >= 0 => Some((al / bl, ah / bl)),
                    LBinOp::Rem | LBinOp::FloorMod if bl == bh && bl > 0 && al >= 0 => {
                        if ah < bl {
                            Some((al, ah))
                        } else {
                            Some((0, bl - 1))
                        }
                    }
                    LBinOp::BitAnd if bl == bh && bl >= 0 && al >= 0 => Some((0, ah.min(bl))),
                    LBinOp::Shr if bl == bh && (0..63).contains(&bl) && al >= 0 => Some((al >> bl, ah >> bl)),
                    LBinOp::Min => Some((al.min(bl), ah.min(bh))),
                    LBinOp::Max => Some((al.max(bl), ah.max(bh))),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    pub fn non_negative(&self, e: &LExpr) -> bool {
        self.bounds(e).is_some_and(|(lo, _)| lo >= 0)
    }

    // ---- folding constructors for integer index arithmetic ----

    /// Folding stops where a constant would overflow (the expression is kept).
    pub fn add(&self, a: LExpr, b: LExpr) -> LExpr {
        match (&a, &b) {
            (LExpr::Int(x, t), LExpr::Int(y, _)) if x.checked_add(*y).is_some() => LExpr::Int(x + y, *t),
            (_, LExpr::Int(0, _)) => a,
            (LExpr::Int(0, _), _) => b,
            // (x + c1) + c2 → x + (c1 + c2): keeps constants together.
            (LExpr::Bin(LBinOp::Add, x, c1), LExpr::Int(c2, t)) => {
                match int_of(c1).and_then(|c1| c1.checked_add(*c2)) {
                    Some(c) => self.add((**x).clone(), LExpr::Int(c, *t)),
                    None => LExpr::bin(LBinOp::Add, a, b),
                }
            }
            // Constants last: `c + x` → `x + c`.
            (LExpr::Int(..), _) => LExpr::bin(LBinOp::Add, b, a),
            _ => LExpr::bin(LBinOp::Add, a, b),
        }
    }

    pub fn sub(&self, a: LExpr, b: LExpr) -> LExpr {
        match (&a, &b) {
            (LExpr::Int(x, t), LExpr::Int(y, _)) if x.checked_sub(*y).is_some() => LExpr::Int(x - y, *t),
            (_, LExpr::Int(0, _)) => a,
            _ => LExpr::bin(LBinOp::Sub, a, b),
        }
    }

    pub fn mul(&self, a: LExpr, b: LExpr) -> LExpr {
        match (&a, &b) {
            (LExpr::Int(x, t), LExpr::Int(y, _)) if x.checked_mul(*y).is_some() => LExpr::Int(x * y, *t),
            (_, LExpr::Int(1, _)) => a,
            (LExpr::Int(1, _), _) => b,
            (_, LExpr::Int(0, t)) | (LExpr::Int(0, t), _) => LExpr::Int(0, *t),
            (LExpr::Int(..), LExpr::Int(..)) => LExpr::bin(LBinOp::Mul, a, b),
            (LExpr::Int(..), _) => self.mul(b, a),
            // (x * c1) * c2 → x * (c1 * c2)
            (LExpr::Bin(LBinOp::Mul, x, c1), LExpr::Int(c2, t)) => {
                match int_of(c1).and_then(|c1| c1.checked_mul(*c2)) {
                    Some(c) => self.mul((**x).clone(), LExpr::Int(c, *t)),
                    None => LExpr::bin(LBinOp::Mul, a, b),
                }
            }
            _ => LExpr::bin(LBinOp::Mul, a, b),
        }
    }

    /// Floor division by a positive constant `c`.
    pub fn div_c(&self, a: LExpr, c: i64) -> LExpr {
        let t = self.ity(&a);
        if c == 1 {
            return a;
        }
        if let LExpr::Int(x, _) = a {
            return LExpr::Int(x.div_euclid(c), t);
        }
        if let Some((lo, hi)) = self.bounds(&a) {
            if lo >= 0 && hi < c {
                return LExpr::Int(0, t);
            }
        }
        // (x / k) / c → x / (k·c): floor division by positive constants composes.
        if let LExpr::Bin(LBinOp::Div | LBinOp::FloorDiv, x, k) = &a {
            if let Some(kc) = int_of(k).filter(|k| *k > 0).and_then(|k| k.checked_mul(c)) {
                return self.div_c((**x).clone(), kc);
            }
        }
        // (x * k + y) / c with c | k → x * (k / c) + y / c (exact for floor division).
        if let Some((x, k, y)) = scaled_plus(&a).filter(|(_, k, _)| k % c == 0) {
            return self.add(self.mul(x, LExpr::Int(k / c, t)), self.div_c(y, c));
        }
        // (x * k) / c with c | k → x * (k / c)
        if let LExpr::Bin(LBinOp::Mul, x, k) = &a {
            if let LExpr::Int(k, _) = **k {
                if k % c == 0 {
                    return self.mul((**x).clone(), LExpr::Int(k / c, t));
                }
            }
        }
        let op = if self.non_negative(&a) { LBinOp::Div } else { LBinOp::FloorDiv };
        LExpr::bin(op, a, LExpr::Int(c, t))
    }

    /// Floor modulo by a positive constant `c`.
    pub fn rem_c(&self, a: LExpr, c: i64) -> LExpr {
        let t = self.ity(&a);
        if c == 1 {
            return LExpr::Int(0, t);
        }
        if let LExpr::Int(x, _) = a {
            return LExpr::Int(x.rem_euclid(c), t);
        }
        if let Some((lo, hi)) = self.bounds(&a) {
            if lo >= 0 && hi < c {
                return a;
            }
        }
        if let LExpr::Bin(LBinOp::Mul, _, k) = &a {
            if let LExpr::Int(k, _) = **k {
                if k % c == 0 {
                    return LExpr::Int(0, t);
                }
            }
        }
        // (x * k + y) mod c with c | k → y mod c.
        if let Some((_, _, y)) = scaled_plus(&a).filter(|(_, k, _)| k % c == 0) {
            return self.rem_c(y, c);
        }
        let op = if self.non_negative(&a) { LBinOp::Rem } else { LBinOp::FloorMod };
        LExpr::bin(op, a, LExpr::Int(c, t))
    }

    /// `(a >> sh) & mask` style bit arithmetic with folding of constants.
    pub fn bin_c(&self, op: LBinOp, a: LExpr, c: i64) -> LExpr {
        let t = self.ity(&a);
        match (op, &a) {
            (LBinOp::Shr | LBinOp::Shl, _) if c == 0 => a,
            (LBinOp::Shr, LExpr::Int(x, _)) if (0..63).contains(&c) => LExpr::Int(x >> c, t),
            (LBinOp::Shl, LExpr::Int(x, _)) if (0..32).contains(&c) && x.checked_mul(1 << c).is_some() => {
                LExpr::Int(x << c, t)
            }
            (LBinOp::BitAnd, LExpr::Int(x, _)) => LExpr::Int(x & c, t),
            (LBinOp::BitAnd, _)
                if self
                    .bounds(&a)
                    .is_some_and(|(lo, hi)| lo >= 0 && hi & !c == 0 && hi < c + 1 && (c + 1) & c == 0) =>
            {
                a
            }
            (LBinOp::BitAnd, _) if self.bounds(&a).is_some_and(|(lo, hi)| lo >= 0 && (hi == 0 || c == 0)) => {
                LExpr::Int(0, t)
            }
            _ => LExpr::bin(op, a, LExpr::Int(c, t)),
        }
    }

    pub fn xor(&self, a: LExpr, b: LExpr) -> LExpr {
        match (&a, &b) {
            (LExpr::Int(x, t), LExpr::Int(y, _)) => LExpr::Int(x ^ y, *t),
            (_, LExpr::Int(0, _)) => a,
            (LExpr::Int(0, _), _) => b,
            _ => LExpr::bin(LBinOp::BitXor, a, b),
        }
    }

    /// Converts an integer expression to `t` (folding constants).
    pub fn to_int(&self, e: LExpr, t: DType) -> LExpr {
        match e {
            LExpr::Int(v, _) => LExpr::Int(v, t),
            LExpr::Special(_) if t == DType::I32 => e,
            LExpr::Cast(from, _) if from == t => e,
            _ => {
                if self.ity_opt(&e) == Some(t) {
                    e
                } else {
                    LExpr::Cast(t, Box::new(e))
                }
            }
        }
    }

    pub fn var_type(&self, v: LVarId) -> DType {
        self.vars[v.0 as usize].dtype
    }

    /// The type of a lowered expression (the LIR typing rules of `tirx_ir::lir::expr_dtype`).
    pub fn dtype_of(&self, e: &LExpr) -> DType {
        tirx_ir::lir::expr_dtype(e, &|v| self.var_type(v), &|b| self.bufs[b.0 as usize].dtype)
    }

    /// Converts any expression to `t` (no-op when it already has that type).
    pub fn convert(&self, e: LExpr, t: DType) -> LExpr {
        let from = self.dtype_of(&e);
        if from == t {
            return e;
        }
        match e {
            LExpr::Int(v, _) if t.is_int() => LExpr::Int(v, t),
            LExpr::Int(v, _) if t.is_float() => LExpr::Float(v as f64, t),
            LExpr::Float(v, _) if t.is_float() => LExpr::Float(v, t),
            _ => LExpr::Cast(t, Box::new(e)),
        }
    }

    /// The linear thread index in the CTA (`tx + ty·Ex + tz·Ex·Ey`).
    fn linear_tid(&self) -> LExpr {
        let [ex, ey, _] = self.block;
        let mut e = LExpr::Special(Special::ThreadIdx(0));
        if self.block[1] > 1 {
            e = self.add(e, self.mul(LExpr::Special(Special::ThreadIdx(1)), LExpr::i32(ex as i64)));
        }
        if self.block[2] > 1 {
            e = self.add(e, self.mul(LExpr::Special(Special::ThreadIdx(2)), LExpr::i32(ex as i64 * ey as i64)));
        }
        e
    }

    /// The variable holding a hardware id, declared in the prelude on first use
    /// (named `name` then, so a script's `tid = T.thread_id(..)` keeps its name).
    pub fn hw(&mut self, hw: Hw, name: &str) -> LExpr {
        if let Some(v) = self.hw_vars.get(&hw) {
            return LExpr::Var(*v);
        }
        let value = match hw {
            Hw::Tx => self.linear_tid(),
            Hw::Lane => self.rem_c(self.linear_tid(), 32),
            Hw::TidInWg => self.rem_c(self.linear_tid(), 128),
            Hw::WarpId => self.div_c(self.linear_tid(), 32),
            Hw::WgId => self.div_c(self.linear_tid(), 128),
            Hw::WarpInWg => self.rem_c(self.div_c(self.linear_tid(), 32), 4),
            Hw::ThreadIdx(d) => LExpr::Special(Special::ThreadIdx(d)),
            Hw::BlockIdx(d) => LExpr::Special(Special::BlockIdx(d)),
            Hw::ClusterCta(d, c) => self.rem_c(LExpr::Special(Special::BlockIdx(d)), i64::from(c)),
            Hw::ClusterIdx(d, c) => self.div_c(LExpr::Special(Special::BlockIdx(d)), i64::from(c)),
        };
        let range = self.bounds(&value);
        let v = self.var(name, DType::I32, range);
        self.prelude.push(LStmt::new(tirx_ir::lir::LStmtKind::Let { var: v, value }, tirx_ir::Span::default()));
        self.hw_vars.insert(hw, v);
        LExpr::Var(v)
    }
}

fn int_of(e: &LExpr) -> Option<i64> {
    match e {
        LExpr::Int(v, _) => Some(*v),
        _ => None,
    }
}

impl Builder {
    /// The integer type an index expression was built in.
    pub fn ity(&self, e: &LExpr) -> DType {
        self.ity_opt(e).unwrap_or(DType::I32)
    }

    fn ity_opt(&self, e: &LExpr) -> Option<DType> {
        match e {
            LExpr::Int(_, t) | LExpr::Cast(t, _) => Some(*t),
            LExpr::Special(_) => Some(DType::I32),
            LExpr::Var(v) => Some(self.var_type(*v)),
            LExpr::Bin(_, a, b) => self.ity_opt(a).or_else(|| self.ity_opt(b)),
            LExpr::Un(_, a) => self.ity_opt(a),
            // A loaded element (`A[0] // 7` of an int64 or uint64 buffer): its buffer's dtype.
            LExpr::Load(..) => Some(self.dtype_of(e)),
            _ => None,
        }
    }
}

/// `x * k + y` (or `y + x * k`) with a constant `k`: `(x, k, y)`.
fn scaled_plus(a: &LExpr) -> Option<(LExpr, i64, LExpr)> {
    let LExpr::Bin(LBinOp::Add, l, r) = a else { return None };
    let scaled = |e: &LExpr| match e {
        LExpr::Bin(LBinOp::Mul, x, k) => match **k {
            LExpr::Int(k, _) if k != 0 => Some(((**x).clone(), k)),
            _ => None,
        },
        _ => None,
    };
    if let Some((x, k)) = scaled(l) {
        return Some((x, k, (**r).clone()));
    }
    scaled(r).map(|(x, k)| (x, k, (**l).clone()))
}
