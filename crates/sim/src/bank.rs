//! Shared-memory bank-conflict statistics.
//!
//! Shared memory has 32 banks of 4 bytes. A warp's access is served in phases:
//! all 32 lanes for ≤ 32-bit accesses, each half-warp for 64-bit, each
//! quarter-warp for 128-bit (and ldmatrix/stmatrix, one phase per 8×8 matrix of
//! eight 16-byte rows). A phase takes as many passes ("ways") as the largest
//! number of *distinct* 4-byte words any one bank must serve; lanes reading the
//! same word are served by one broadcast. One warp execution's ways is the worst
//! of its phases.
//!
//! Lanes run one after another in the simulator, so the accesses of one warp
//! execution are matched up afterwards: the n-th execution of an access point by
//! each lane of a warp forms the warp's n-th execution of it.

use crate::BankStat;
use std::collections::HashMap;
use tirx_ir::Span;

/// One lane's shared-memory access.
#[derive(Clone, Copy, Debug)]
struct Access {
    point: u32,
    warp: u32,
    occ: u32,
    lane: u8,
    width: u8,
    addr: u32,
}

/// Where an access point is in the source, for the report.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PointKey {
    pub span: Span,
    pub buf: u32,
    pub kind: &'static str,
}

#[derive(Default)]
pub(crate) struct BankCollector {
    points: HashMap<PointKey, u32>,
    keys: Vec<PointKey>,
    /// The point of the previous access: consecutive accesses usually share it.
    last: Option<(PointKey, u32)>,
    /// Per point and thread: how many times the thread has executed it in the current CTA.
    occ: Vec<Vec<u32>>,
    pending: Vec<Access>,
    /// Per point: (executions, worst ways, total ways).
    totals: Vec<(u64, u32, u64)>,
}

impl BankCollector {
    fn point(&mut self, key: PointKey) -> u32 {
        if let Some((k, p)) = &self.last {
            if *k == key {
                return *p;
            }
        }
        let next = self.keys.len() as u32;
        let point = *self.points.entry(key.clone()).or_insert(next);
        if point == next {
            self.keys.push(key.clone());
            self.totals.push((0, 0, 0));
            self.occ.push(vec![]);
        }
        self.last = Some((key, point));
        point
    }

    /// Records one lane's access of `width` bytes at shared byte address `addr`.
    pub fn record(&mut self, key: PointKey, tid: u32, addr: u32, width: u32) {
        let point = self.point(key);
        let counts = &mut self.occ[point as usize];
        if counts.len() <= tid as usize {
            counts.resize(tid as usize + 1, 0);
        }
        let occ = counts[tid as usize];
        counts[tid as usize] += 1;
        self.pending.push(Access { point, warp: tid / 32, occ, lane: (tid % 32) as u8, width: width as u8, addr });
    }

    /// Records the rows of one ldmatrix/stmatrix: `rows[i]` is the address supplied by lane i.
    /// Each row is a 16-byte access; the phase of lane i is its matrix (i / 8), as for 128-bit loads.
    pub fn record_rows(&mut self, key: PointKey, warp: u32, rows: &[u32]) {
        for (i, a) in rows.iter().enumerate() {
            self.record(key.clone(), warp * 32 + i as u32, *a, 16);
        }
    }

    /// Groups the accesses of the finished CTA into warp executions and accumulates their ways.
    pub fn flush_cta(&mut self) {
        let mut acc = std::mem::take(&mut self.pending);
        acc.sort_unstable_by_key(|a| (a.point, a.warp, a.occ, a.lane));
        for group in acc.chunk_by(|a, b| (a.point, a.warp, a.occ) == (b.point, b.warp, b.occ)) {
            let ways = execution_ways(group);
            let t = &mut self.totals[group[0].point as usize];
            t.0 += 1;
            t.1 = t.1.max(ways);
            t.2 += ways as u64;
        }
        self.occ.iter_mut().for_each(|c| c.fill(0));
    }

    pub fn report(mut self, buf_name: impl Fn(u32) -> String) -> Vec<BankStat> {
        self.flush_cta();
        let mut out: Vec<BankStat> = self
            .keys
            .iter()
            .zip(&self.totals)
            .filter(|(_, t)| t.0 > 0)
            .map(|(k, t)| BankStat {
                span: k.span,
                buf: buf_name(k.buf),
                kind: k.kind,
                executions: t.0,
                worst_ways: t.1,
                avg_ways: t.2 as f64 / t.0 as f64,
            })
            .collect();
        out.sort_by(|a, b| (a.span, a.kind, &a.buf).cmp(&(b.span, b.kind, &b.buf)));
        out
    }
}

/// Ways of one warp execution: the worst of its phases.
fn execution_ways(group: &[Access]) -> u32 {
    let lanes_per_phase = match group[0].width {
        0..=4 => 32,
        5..=8 => 16,
        _ => 8,
    };
    let mut worst = 0;
    for phase in group.chunk_by(|a, b| a.lane / lanes_per_phase == b.lane / lanes_per_phase) {
        worst = worst.max(phase_ways(phase));
    }
    worst
}

fn phase_ways(phase: &[Access]) -> u32 {
    let mut words: Vec<u32> = phase
        .iter()
        .flat_map(|a| {
            let first = a.addr / 4;
            let last = (a.addr + a.width as u32 - 1) / 4;
            first..=last
        })
        .collect();
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u32; 32];
    for w in words {
        per_bank[(w % 32) as usize] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(lane: u8, addr: u32, width: u8) -> Access {
        Access { point: 0, warp: 0, occ: 0, lane, width, addr }
    }

    #[test]
    fn ways_of_common_patterns() {
        let row: Vec<_> = (0..32).map(|l| acc(l, l as u32 * 4, 4)).collect();
        assert_eq!(execution_ways(&row), 1);
        let col: Vec<_> = (0..32).map(|l| acc(l, l as u32 * 128, 4)).collect();
        assert_eq!(execution_ways(&col), 32);
        let bcast: Vec<_> = (0..32).map(|l| acc(l, 0, 4)).collect();
        assert_eq!(execution_ways(&bcast), 1);
        let v4: Vec<_> = (0..32).map(|l| acc(l, l as u32 * 16, 16)).collect();
        assert_eq!(execution_ways(&v4), 1);
        let v4_stride: Vec<_> = (0..32).map(|l| acc(l, l as u32 * 32, 16)).collect();
        assert_eq!(execution_ways(&v4_stride), 2);
    }
}
