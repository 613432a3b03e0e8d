//! Register reductions: the analysis and code shared by `local_thread`,
//! `warp_shuffle` and `local_view` (docs/tile-primitives.md §3.10).
//!
//! Both operands are register regions (`crate::operand::register`: sliced and
//! canonical, thread axes kept). The destination takes one of three forms:
//! * [`Form::Whole`]: its extents are the source's kept extents (unit dims
//!   aside), as in NumPy — each element is the reduction of everything with
//!   its kept coordinates;
//! * [`Form::PerThread`]: it keeps every reduced dim, with the extent of the
//!   threads that dim is spread over (the reference's view form for MMA
//!   accumulators: `(16, 128)` reduced over its 128 columns, 4 lanes per row,
//!   into `(16, 4)`) — element `(k, c)` is the reduction of the elements of
//!   row `k` whose reduced coordinates' thread digits are `c`, or with a
//!   butterfly over those threads, the whole row in every one of them;
//! * [`Form::AcrossThreads`]: it keeps every reduced dim with its register
//!   extent (the dim's extent over the threads it is spread over) — element
//!   `(k, r)` is the reduction, over the threads, of the elements of row `k`
//!   whose reduced coordinates' register digits are `r` (the reference's
//!   shuffle pattern on a flat view: `(128,)` laid out `S[(32, 4):(1@laneid, 1)]`
//!   into `(4,)` laid out `S[4:1] + R[32:1@laneid]`, four sums over the lanes).
//!
//! Nothing is assumed from the shapes of the layouts: [`plan`] enumerates
//! which thread and register hold every source and destination element and
//! checks that one program — the same register indices in every thread — folds
//! the right source registers into each destination register, and that the
//! butterfly's lane groups complete each reduction. Then it expresses the
//! program as loops: the destination's register iters (outer), the reduced
//! dims' register iters (inner), the source's base register affine in the
//! outer loop.

use super::call::ReduceRule;
use super::call::{butterfly, combine, compute_type, loop_var, operand_scopes, parse, wrap_loop, ReduceCall};
use crate::operand::{self, group_offset, UNROLL_ELEMS};
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan};
use std::collections::{BTreeMap, HashMap};
use tirx_ir::lir::{LBufId, LExpr, LStmt, LStmtKind, MemOp};
use tirx_ir::op::ReduceOp;
use tirx_ir::DType;
use tirx_layout::{apply::split_coord, Axis, ExecScope, Iter, TileLayout};

/// A thread's destination registers: register → (the key of its kept
/// coordinates among the source's, its reduced coordinates in the per-thread form).
type DstRegs = BTreeMap<i64, (Option<usize>, Vec<i64>)>;

/// Largest source region whose element homes are enumerated.
const ENUM_LIMIT: i64 = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The destination has the kept extents: every element a whole reduction.
    Whole,
    /// The destination keeps each reduced dim with its thread extent: one value per thread.
    PerThread,
    /// The destination keeps each reduced dim with its register extent: one reduction over
    /// the threads per register position.
    AcrossThreads,
}

/// What the layouts say, before a variant decides on a butterfly.
pub struct Analysis {
    pub form: Form,
    src: TileLayout,
    dst: TileLayout,
    se: Vec<i64>,
    de: Vec<i64>,
    /// The source grouped by its region extents, and the dim separators.
    grouped: Vec<Iter>,
    seps: Vec<usize>,
    /// Thread iters of the reduced dims of the source.
    pub reduced_threads: Vec<Iter>,
    pub threads: i64,
    kind: ExecScope,
}

impl Analysis {
    /// The lane masks of a butterfly over the reduced dims' thread iters, widest
    /// first; `Err` when they are not lane bits of one warp.
    pub fn lane_masks(&self) -> Result<Vec<u32>, String> {
        let mut masks = Vec::new();
        for it in &self.reduced_threads {
            let (e, s) = (it.extent, it.stride);
            if !(e as u64).is_power_of_two() || s <= 0 || !(s as u64).is_power_of_two() {
                return Err(format!(
                    "the reduced thread iter {e}:{s}@{} does not select lane bits (extent and stride must be powers of two)",
                    it.axis
                ));
            }
            if e * s > 32 {
                return Err(format!(
                    "the reduced thread iter {e}:{s}@{} spans threads of several warps; shuffles stay in a warp (reduce through shared memory)",
                    it.axis
                ));
            }
            let mut b = s;
            while b < e * s {
                masks.push(b as u32);
                b *= 2;
            }
        }
        masks.sort_unstable_by(|a, b| b.cmp(a));
        masks.dedup();
        Ok(masks)
    }
}

/// The loops of a register reduction (everything `emit` needs).
#[derive(Clone, Debug)]
pub struct RegPlan {
    /// Destination registers of a thread: `dst_off + group(dst_loops, k)`, `k < regs`.
    dst_off: i64,
    dst_loops: Vec<Iter>,
    /// The first source register of destination register `k`: `src_off + group(src_delta, k)`.
    src_off: i64,
    src_delta: Vec<Iter>,
    /// Source registers folded into one destination register: `first + group(inner, q)`, `q < fold`.
    inner: Vec<Iter>,
    pub regs: i64,
    pub fold: i64,
    /// The interleaved chains each fold runs in ([`chains`]; 1: one, in order).
    pub chains: i64,
    /// Source elements a thread holds.
    pub src_per_thread: i64,
    pub masks: Vec<u32>,
}

impl RegPlan {
    /// `4 destination registers per thread, each a fold of 8 source registers`.
    pub fn describe(&self) -> String {
        let s = |n: i64| if n == 1 { "" } else { "s" };
        format!(
            "per thread {} source element{} into {} destination register{}, each a fold of {} register{}{}",
            self.src_per_thread,
            s(self.src_per_thread),
            self.regs,
            s(self.regs),
            self.fold,
            s(self.fold),
            if self.chains > 1 { format!(" in {} interleaved chains", self.chains) } else { String::new() }
        )
    }
}

/// The thread axis a `kind`-scope register operand numbers its threads by
/// (in CTAs of ≤ 32 / ≤ 128 threads `laneid` / `tid_in_wg` number them as `tx`).
fn allowed_axis(a: Axis, kind: ExecScope, threads: i64) -> bool {
    match kind {
        ExecScope::Warp => a == Axis::LaneId,
        ExecScope::Warpgroup => a == Axis::TidInWg,
        ExecScope::Cta => {
            a == Axis::Tx || (a == Axis::LaneId && threads <= 32) || (a == Axis::TidInWg && threads <= 128)
        }
        _ => false,
    }
}

/// Resolves both operands and decides the destination's form.
pub fn analyze(cx: &CallCx, call: &ReduceCall, kind: ExecScope, threads: i64) -> Result<Analysis, Decline> {
    let reg = |r| operand::register(cx, r).map_err(|m| Decline::new(ReduceRule::RegisterLayout, m));
    let (src, dst) = (reg(call.src)?.tile, reg(call.dst)?.tile);
    let names = (&cx.buf(call.src.buf).name, &cx.buf(call.dst.buf).name);
    for (t, name) in [(&src, names.0), (&dst, names.1)] {
        let offsets = t.offset.iter().filter(|(_, v)| **v != 0).map(|(a, _)| *a);
        let mut axes = t.shard.iter().chain(&t.replica).map(|i| i.axis).chain(offsets);
        if let Some(a) = axes.find(|a| a.is_thread() && !allowed_axis(*a, kind, threads)) {
            return Err(Decline::new(
                ReduceRule::RegisterLayout,
                format!("`{name}` is distributed over {a}, not the threads of this {kind}-scope call"),
            ));
        }
    }
    if let Some(it) = src.replica.iter().find(|i| i.axis.is_thread()) {
        return Err(Decline::new(
            ReduceRule::Replicated,
            format!(
                "the source `{}` is replicated over {} (a reduction would count its elements several times)",
                names.0, it.axis
            ),
        ));
    }
    let (se, de) = (call.src_extents(), call.dst_extents());
    let (g, seps) = src.group(&se).map_err(|e| {
        Decline::new(
            ReduceRule::ReduceLayout,
            format!("the layout of `{}` does not split over its region {se:?}: {e}", names.0),
        )
    })?;
    let dim_threads = |d: usize| -> i64 {
        g.shard[seps[d]..seps[d + 1]].iter().filter(|i| i.axis.is_thread()).map(|i| i.extent).product()
    };
    let kept: Vec<usize> = (0..se.len()).filter(|d| !call.axes.contains(d)).collect();
    let squeeze = |v: Vec<i64>| v.into_iter().filter(|&e| e != 1).collect::<Vec<_>>();
    let keeps_reduced = |extent: &dyn Fn(usize) -> i64| {
        de.len() == se.len() && kept.iter().all(|&d| de[d] == se[d]) && call.axes.iter().all(|&d| de[d] == extent(d))
    };
    let per_thread = keeps_reduced(&dim_threads);
    // Every reduced dim spread over threads, the destination replicated over threads
    // (which tells it from the per-thread form when both extents agree).
    let across = call.axes.iter().all(|&d| dim_threads(d) > 1)
        && keeps_reduced(&|d| se[d] / dim_threads(d))
        && (!per_thread || dst.replica.iter().any(|i| i.axis.is_thread()));
    let form = if squeeze(kept.iter().map(|&d| se[d]).collect()) == squeeze(de.clone()) {
        Form::Whole
    } else if across {
        Form::AcrossThreads
    } else if per_thread {
        Form::PerThread
    } else {
        let per: Vec<String> = call
            .axes
            .iter()
            .map(|&d| format!("dim {d}: {} threads × {} registers", dim_threads(d), se[d] / dim_threads(d)))
            .collect();
        return Err(Decline::new(
            ReduceRule::ReduceLayout,
            format!(
                "the destination region {de:?} is neither the kept extents of {se:?} nor the source's rank with each reduced dim at its thread or its register extent ({})",
                per.join(", ")
            ),
        ));
    };
    let reduced_threads = call
        .axes
        .iter()
        .flat_map(|&d| g.shard[seps[d]..seps[d + 1]].iter().filter(|i| i.axis.is_thread() && i.extent > 1).copied())
        .collect();
    Ok(Analysis { form, src, dst, se, de, grouped: g.shard, seps, reduced_threads, threads, kind })
}

/// Which thread and register hold the element at flat index `x` of a region tile (`None`: no thread axis).
fn home(t: &TileLayout, x: i64) -> Result<(i64, i64), String> {
    let c = t.apply_linear(x).map_err(|e| e.to_string())?;
    home_of(&c)
}

fn home_of(c: &tirx_layout::Coord) -> Result<(i64, i64), String> {
    let mut thread = None;
    for (a, &v) in c.iter().filter(|(a, _)| a.is_thread()) {
        if thread.is_some() && v != 0 {
            return Err(format!("an element lives on two thread axes ({a})"));
        }
        if v != 0 || thread.is_none() {
            thread = Some(v);
        }
    }
    Ok((thread.unwrap_or(0), c.get(&Axis::M).copied().unwrap_or(0)))
}

fn layout_err(m: String) -> Decline {
    Decline::new(ReduceRule::ReduceLayout, m)
}

/// Checks that one register program with butterfly `masks` computes the
/// reduction the destination's form asks for, and returns it as loops.
pub fn plan(a: &Analysis, call: &ReduceCall, masks: &[u32], names: (&str, &str)) -> Result<RegPlan, Decline> {
    let n_src: i64 = a.se.iter().product();
    let n_dst: i64 = a.de.iter().product();
    if n_src > ENUM_LIMIT {
        return Err(layout_err(format!(
            "the source region has {n_src} elements, more than the {ENUM_LIMIT} this variant checks one by one"
        )));
    }
    let t = a.threads as usize;
    let kept: Vec<usize> = (0..a.se.len()).filter(|d| !call.axes.contains(d)).collect();
    // Source: home thread and register, key (kept coordinates), thread digits of the reduced coordinates.
    let mut keys: HashMap<Vec<i64>, usize> = HashMap::new();
    let mut src_key = Vec::with_capacity(n_src as usize);
    let mut src_reg = Vec::with_capacity(n_src as usize);
    let mut src_part = Vec::with_capacity(n_src as usize);
    let mut by_thread: Vec<Vec<usize>> = vec![vec![]; t];
    for i in 0..n_src {
        let (th, r) = home(&a.src, i).map_err(layout_err)?;
        if !(0..a.threads).contains(&th) {
            return Err(layout_err(format!("`{}` has an element on thread {th}, outside the {t} threads", names.0)));
        }
        let x = split_coord(i, &a.se);
        let mut key: Vec<i64> = kept.iter().map(|&d| x[d]).collect();
        if a.form == Form::AcrossThreads {
            key.extend(digits(a, call, &x, false));
        }
        let n = keys.len();
        src_key.push(*keys.entry(key).or_insert(n));
        src_reg.push(r);
        src_part.push(digits(a, call, &x, true));
        by_thread[th as usize].push(i as usize);
    }
    // Destination: per thread, register → (key, partial index).
    let mut dst_at: Vec<DstRegs> = vec![BTreeMap::new(); t];
    let dst_sq: Vec<usize> = (0..a.de.len()).filter(|&d| a.de[d] != 1).collect();
    let kept_sq: Vec<usize> = (0..kept.len()).filter(|&k| a.se[kept[k]] != 1).collect();
    for j in 0..n_dst {
        let y = split_coord(j, &a.de);
        let (key, part) = match a.form {
            Form::Whole => {
                let mut key = vec![0; kept.len()];
                for (&k, &d) in kept_sq.iter().zip(&dst_sq) {
                    key[k] = y[d];
                }
                (key, vec![])
            }
            Form::PerThread => (kept.iter().map(|&d| y[d]).collect(), call.axes.iter().map(|&d| y[d]).collect()),
            // The register digits of the reduced coordinates join the key.
            Form::AcrossThreads => (kept.iter().chain(&call.axes).map(|&d| y[d]).collect(), vec![]),
        };
        let homes = a.dst.apply_set(&y, &a.de).map_err(|e| layout_err(e.to_string()))?;
        for c in homes {
            let (th, r) = home_of(&c).map_err(layout_err)?;
            if !(0..a.threads).contains(&th) {
                return Err(layout_err(format!(
                    "`{}` has an element on thread {th}, outside the {t} threads",
                    names.1
                )));
            }
            dst_at[th as usize].insert(r, (keys.get(&key).copied(), part.clone()));
        }
    }
    check_uniform_dst(a, &dst_at, masks, names.1)?;
    let group = lane_group(masks);
    // Per thread, its source elements by key, in row-major order.
    let mut by_thread_key: Vec<HashMap<usize, Vec<usize>>> = vec![HashMap::new(); t];
    for (th, elems) in by_thread.iter().enumerate() {
        for &i in elems {
            by_thread_key[th].entry(src_key[i]).or_default().push(i);
        }
    }
    let local = |th: usize, key: Option<usize>| -> &[usize] {
        key.and_then(|k| by_thread_key[th].get(&k)).map_or(&[][..], |v| &v[..])
    };
    let mut by_key: Vec<Vec<usize>> = vec![vec![]; keys.len()];
    for (i, &k) in src_key.iter().enumerate() {
        by_key[k].push(i);
    }
    let regs0: Vec<i64> = dst_at[0].keys().copied().collect();
    let mut lists0: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for th in 0..t {
        for (&rd, (key, part)) in &dst_at[th] {
            let mine = local(th, *key);
            let regs: Vec<i64> = mine.iter().map(|&i| src_reg[i]).collect();
            if mine.is_empty() {
                return Err(layout_err(format!(
                    "thread {th} holds destination register {rd} of `{}` but none of the source elements it reduces",
                    names.1
                )));
            }
            match lists0.get(&rd) {
                Some(l0) if *l0 != regs => {
                    return Err(layout_err(format!(
                        "threads fold different registers into destination register {rd} (thread 0: {l0:?}, thread {th}: {regs:?}); one program cannot serve both"
                    )))
                }
                Some(_) => {}
                None => {
                    lists0.insert(rd, regs);
                }
            }
            // The elements this register must end up reducing, and what the butterfly combines
            // (each lane of the group folds the elements of its own destination register).
            let all = key.map_or(&[][..], |k| &by_key[k][..]);
            let whole = a.form != Form::PerThread || !masks.is_empty();
            let want: Vec<usize> = all.iter().copied().filter(|&i| whole || src_part[i] == *part).collect();
            let mut got = Vec::with_capacity(want.len());
            for &b in &group {
                let u = th ^ b as usize;
                match dst_at.get(u).and_then(|m| m.get(&rd)) {
                    Some((ku, _)) => got.extend_from_slice(local(u, *ku)),
                    None => return Err(incomplete(a, th, rd, masks, names)),
                }
            }
            got.sort_unstable();
            if got != want {
                return Err(incomplete(a, th, rd, masks, names));
            }
        }
    }
    fit(a, call, &regs0, &lists0, masks, by_thread[0].len() as i64)
}

/// The thread (`thread`) or register (`!thread`) digits of the reduced coordinates of `x`
/// (per reduced dim, row-major over its thread or its other iters).
fn digits(a: &Analysis, call: &ReduceCall, x: &[i64], thread: bool) -> Vec<i64> {
    call.axes
        .iter()
        .map(|&d| {
            let g = &a.grouped[a.seps[d]..a.seps[d + 1]];
            let digits = split_coord(x[d], &g.iter().map(|i| i.extent).collect::<Vec<_>>());
            g.iter().zip(digits).filter(|(i, _)| i.axis.is_thread() == thread).fold(0, |acc, (i, c)| acc * i.extent + c)
        })
        .collect()
}

/// Every thread holds the same destination registers (one program serves all).
fn check_uniform_dst(a: &Analysis, dst_at: &[DstRegs], masks: &[u32], dst: &str) -> Result<(), Decline> {
    let regs = |m: &BTreeMap<i64, _>| m.keys().copied().collect::<Vec<i64>>();
    let r0 = regs(&dst_at[0]);
    for (th, m) in dst_at.iter().enumerate() {
        let r = regs(m);
        if r == r0 {
            continue;
        }
        let what = |v: &[i64]| if v.is_empty() { "none".to_string() } else { format!("registers {v:?}") };
        let msg = format!("thread {th} holds {} of `{dst}` but thread 0 holds {}", what(&r), what(&r0));
        if a.form != Form::PerThread && !masks.is_empty() {
            return Err(Decline::new(
                ReduceRule::DstReplica,
                format!(
                    "{msg}: every lane of a butterfly group ends with the whole reduction, so the destination must be replicated over the lanes it combines (masks {}), e.g. `+ R[32:1@laneid]`",
                    super::call::masks_text(masks)
                ),
            ));
        }
        return Err(layout_err(format!("{msg}; every thread must hold the same destination registers")));
    }
    if r0.is_empty() {
        return Err(layout_err(format!("no thread of the {} holds an element of `{dst}`", a.kind)));
    }
    Ok(())
}

/// The xor offsets that reach every lane of a butterfly group (the span of the masks).
fn lane_group(masks: &[u32]) -> Vec<u32> {
    let mut g = vec![0u32];
    for &m in masks {
        let more: Vec<u32> = g.iter().map(|x| x ^ m).collect();
        g.extend(more);
    }
    g.sort_unstable();
    g.dedup();
    g
}

fn incomplete(a: &Analysis, th: usize, rd: i64, masks: &[u32], names: (&str, &str)) -> Decline {
    let how = if masks.is_empty() {
        "its own registers".to_string()
    } else {
        format!("a butterfly over masks {}", super::call::masks_text(masks))
    };
    let form = match a.form {
        Form::Whole => "the whole reduction of its kept coordinates",
        Form::PerThread => "the reduction its thread digits select",
        Form::AcrossThreads => "the reduction over the threads of its register position",
    };
    layout_err(format!(
        "destination register {rd} of thread {th} (`{}`) must hold {form}, but {how} gives other elements of `{}`",
        names.1, names.0
    ))
}

/// Expresses the checked program as loops, or declines when the registers are not affine in them.
fn fit(
    a: &Analysis,
    call: &ReduceCall,
    regs0: &[i64],
    lists: &BTreeMap<i64, Vec<i64>>,
    masks: &[u32],
    src_per_thread: i64,
) -> Result<RegPlan, Decline> {
    let dst_loops: Vec<Iter> = a.dst.shard.iter().filter(|i| i.axis == Axis::M && i.extent > 1).copied().collect();
    let dst_off = crate::lay::m_offset(&a.dst);
    let regs: i64 = dst_loops.iter().map(|i| i.extent).product();
    let rd = |k: i64| dst_off + group_offset(&dst_loops, k);
    let mut want: Vec<i64> = (0..regs).map(rd).collect();
    want.sort_unstable();
    if want != regs0 {
        return Err(layout_err(format!(
            "the destination's register iters give registers {want:?}, but a thread holds {regs0:?}"
        )));
    }
    // The reduced dims' register iters are folded, unless the destination keeps them.
    let inner: Vec<Iter> = call
        .axes
        .iter()
        .filter(|_| a.form != Form::AcrossThreads)
        .flat_map(|&d| {
            a.grouped[a.seps[d]..a.seps[d + 1]].iter().filter(|i| i.axis == Axis::M && i.extent > 1).copied()
        })
        .collect();
    let fold: i64 = inner.iter().map(|i| i.extent).product();
    let list = |k: i64| {
        lists
            .get(&rd(k))
            .filter(|l| !l.is_empty())
            .ok_or_else(|| layout_err(format!("destination register {} folds no source register", rd(k))))
    };
    let mut first = Vec::with_capacity(regs as usize);
    for k in 0..regs {
        first.push(list(k)?[0]);
    }
    for k in 0..regs {
        let l = list(k)?;
        let expect: Vec<i64> = (0..fold).map(|q| first[k as usize] + group_offset(&inner, q)).collect();
        if *l != expect {
            return Err(layout_err(format!(
                "destination register {} folds source registers {l:?}, not the reduced dims' register iters {expect:?}",
                rd(k)
            )));
        }
    }
    // The first source register, affine in the destination loops: one delta per loop.
    let mut src_delta = Vec::with_capacity(dst_loops.len());
    let mut unit = regs;
    for it in &dst_loops {
        unit /= it.extent;
        src_delta.push(Iter::m(it.extent, first[unit as usize] - first[0]));
    }
    for k in 0..regs {
        if first[k as usize] != first[0] + group_offset(&src_delta, k) {
            return Err(layout_err(
                "the source registers of successive destination registers are not evenly spaced along its register iters".into(),
            ));
        }
    }
    Ok(RegPlan {
        dst_off,
        dst_loops,
        src_off: first[0],
        src_delta,
        inner,
        regs,
        fold,
        chains: chains(call.op, fold),
        src_per_thread,
        masks: masks.to_vec(),
    })
}

/// Emits the plan, one unrolled iteration per destination register: fold its
/// source registers into `acc` (the compute type `ct`), the butterfly, then
/// `dst = acc` (combined with the old destination under `accum`), converted to
/// the destination's type. `member`: the lanes of each warp that run the butterfly.
pub fn emit(em: &mut Emitter, p: &RegPlan, call: &ReduceCall, ct: DType, member: u32) -> Result<(), Bug> {
    let (src, sity) = em.lbuf(call.src.buf)?;
    let (dst, dity) = em.lbuf(call.dst.buf)?;
    let op = call.op;
    let lanes = p.chains;
    let acc = em.local_buf("acc", ct, lanes);
    let a0 = LExpr::i32(0);
    let k = loop_var(em, "k", p.regs);
    let kx = k.map_or(LExpr::i32(0), LExpr::Var);
    let b = em.builder();
    let base = b.add(LExpr::Int(p.src_off, sity), crate::addr::dim_offset(b, &p.src_delta, b.to_int(kx.clone(), sity)));
    let mut body = if lanes > 1 {
        fold_in_chains(em, p, op, (src, sity), acc, lanes, &base, ct)
    } else {
        fold_in_order(em, p, op, (src, sity), acc, base, ct)
    };
    body.extend(butterfly(em, op, acc, &a0, &p.masks, ct, member));
    let b = em.builder();
    let di = b.add(LExpr::Int(p.dst_off, dity), crate::addr::dim_offset(b, &p.dst_loops, b.to_int(kx, dity)));
    let mut value = LExpr::Load(acc, Box::new(a0));
    if call.accum {
        value = combine(op, value, b.convert(LExpr::Load(dst, Box::new(di.clone())), ct));
    }
    let value = b.convert(value, call.dtype);
    body.push(LStmt::new(LStmtKind::Memory(MemOp::Store { buf: dst, index: di, value }), em.span));
    let unroll = p.regs.saturating_mul(p.fold) <= UNROLL_ELEMS;
    let out = wrap_loop(em, k, p.regs, unroll, body);
    em.stmts.extend(out);
    Ok(())
}

/// The independent partial results a thread folds a destination register's
/// source registers into: 4 (or 2) for `max` and `min` over 8 or more, whose
/// result is the same in any order, so that the fold is not one chain of
/// dependent instructions each waiting on the last (ptxas keeps the order it
/// is given: attention's row maxima over 112 scores were 56 FMNMX in a row);
/// a sum keeps one, its documented row-major order. (One chain for `max`, which lets
/// ptxas start the exponentials of a softmax's first row during its second row's
/// max, as FlashAttention-3's SASS does, ran the FP8 attention kernel 1-3 % slower on
/// an H100: README, attention.)
fn chains(op: ReduceOp, fold: i64) -> i64 {
    if op == ReduceOp::Sum || fold < 8 {
        return 1;
    }
    [4, 2].into_iter().find(|w| fold % w == 0).unwrap_or(1)
}

/// `acc[0] = src[base]; for q in 1..fold { acc[0] = op(acc[0], src[base + inner(q)]) }`.
fn fold_in_order(
    em: &mut Emitter,
    p: &RegPlan,
    op: ReduceOp,
    (src, sity): (LBufId, DType),
    acc: LBufId,
    base: LExpr,
    ct: DType,
) -> Vec<LStmt> {
    let a0 = LExpr::i32(0);
    let b = em.builder();
    let load = |b: &crate::build::Builder, i: LExpr| b.convert(LExpr::Load(src, Box::new(i)), ct);
    let mut body = vec![LStmt::new(
        LStmtKind::Memory(MemOp::Store { buf: acc, index: a0.clone(), value: load(b, base.clone()) }),
        em.span,
    )];
    if p.fold > 1 {
        let q = em.var("q", DType::I32, Some((1, p.fold - 1)));
        let b = em.builder();
        let idx = b.add(base, crate::addr::dim_offset(b, &p.inner, b.to_int(LExpr::Var(q), sity)));
        let value = combine(op, LExpr::Load(acc, Box::new(a0.clone())), load(b, idx));
        let step = LStmt::new(LStmtKind::Memory(MemOp::Store { buf: acc, index: a0.clone(), value }), em.span);
        body.push(LStmt::new(
            LStmtKind::For {
                var: q,
                begin: LExpr::i32(1),
                extent: LExpr::i32(p.fold - 1),
                unroll: p.fold <= UNROLL_ELEMS,
                body: vec![step],
            },
            em.span,
        ));
    }
    body
}

/// `lanes` interleaved chains, then their halves combined:
/// `acc[w] = src[base + inner(w)]`, `acc[w] = op(acc[w], src[base + inner(q lanes + w)])`
/// for `q` in `1..fold / lanes`, then `acc[w] = op(acc[w], acc[w + h])` for
/// `h = lanes / 2, …, 1` (`acc[0]` the result).
#[allow(clippy::too_many_arguments)]
fn fold_in_chains(
    em: &mut Emitter,
    p: &RegPlan,
    op: ReduceOp,
    (src, sity): (LBufId, DType),
    acc: LBufId,
    lanes: i64,
    base: &LExpr,
    ct: DType,
) -> Vec<LStmt> {
    let store = |index: LExpr, value: LExpr| LStmtKind::Memory(MemOp::Store { buf: acc, index, value });
    let element = |b: &crate::build::Builder, q: LExpr| {
        let i = b.add(base.clone(), crate::addr::dim_offset(b, &p.inner, b.to_int(q, sity)));
        b.convert(LExpr::Load(src, Box::new(i)), ct)
    };
    let w = em.var("w", DType::I32, Some((0, lanes - 1)));
    let first = store(LExpr::Var(w), element(em.builder(), LExpr::Var(w)));
    let mut body = wrap_loop(em, Some(w), lanes, true, vec![LStmt::new(first, em.span)]);
    let q = em.var("q", DType::I32, Some((1, p.fold / lanes - 1)));
    let w = em.var("w", DType::I32, Some((0, lanes - 1)));
    let b = em.builder();
    let at = b.add(b.mul(LExpr::Var(q), LExpr::i32(lanes)), LExpr::Var(w));
    let value = combine(op, LExpr::Load(acc, Box::new(LExpr::Var(w))), element(b, at));
    let inner = wrap_loop(em, Some(w), lanes, true, vec![LStmt::new(store(LExpr::Var(w), value), em.span)]);
    body.push(LStmt::new(
        LStmtKind::For {
            var: q,
            begin: LExpr::i32(1),
            extent: LExpr::i32(p.fold / lanes - 1),
            unroll: p.fold <= UNROLL_ELEMS,
            body: inner,
        },
        em.span,
    ));
    let mut h = lanes / 2;
    while h >= 1 {
        for w in 0..h {
            let value =
                combine(op, LExpr::Load(acc, Box::new(LExpr::i32(w))), LExpr::Load(acc, Box::new(LExpr::i32(w + h))));
            body.push(LStmt::new(store(LExpr::i32(w), value), em.span));
        }
        h /= 2;
    }
    body
}

/// A register reduction after the checks each register variant makes first.
pub struct Checked<'a> {
    pub call: ReduceCall<'a>,
    pub ct: DType,
    /// `(source, destination)` buffer names, for messages.
    pub names: (&'a str, &'a str),
}

/// The operand, scope and type checks of `local_thread`, `warp_shuffle` and
/// `local_view`, in one order so that a call none of them takes is declined
/// with the same reason by each.
pub fn check<'a>(cx: &CallCx<'a>, variant: &str) -> Result<Checked<'a>, Decline> {
    let call = parse(cx)?;
    operand_scopes(cx, &call, false, variant)?;
    let ct = compute_type(call.op, call.dtype)?;
    let names = (cx.buf(call.src.buf).name.as_str(), cx.buf(call.dst.buf).name.as_str());
    Ok(Checked { call, ct, names })
}

/// What a register variant's plan carries to its emit: the three variants
/// differ only in how they plan, so they share one emit ([`emit_plan`]).
struct RegsPlan {
    regs: RegPlan,
    ct: DType,
    /// The butterfly's lanes (`u32::MAX` when there is none).
    member: u32,
}

/// The dispatch plan of a register variant: one element per access, `rounds` steps per thread.
pub fn to_plan(summary: String, regs: RegPlan, ct: DType, member: u32, rounds: i64) -> Plan {
    let mut plan = Plan::new(summary, RegsPlan { regs, ct, member });
    plan.vec = Some(1);
    plan.rounds = Some(rounds as u64);
    plan
}

/// Emits a plan made by [`to_plan`]; `who` names the variant if it is not one.
pub fn emit_plan(plan: &Plan, cx: &CallCx, em: &mut Emitter, who: &'static str) -> Result<(), Bug> {
    let p = plan.data::<RegsPlan>(who)?;
    let call = parse(cx)?;
    emit(em, &p.regs, &call, p.ct, p.member)
}
