//! Plan then emit, and emit cannot decline: when the chosen variant's emit
//! fails, lowering reports an internal error at the call naming that variant;
//! it never falls through to another (slower) variant and leaves no code.
//! Checked for every example and for random copy round trips of the
//! lowering matrices.

mod common;

use common::RoundTrip;
use proptest::prelude::*;
use std::path::PathBuf;
use tirx_ir::hir::Kernel;
use tirx_ir::op::Family;
use tirx_lower::{lower_with, Bug, CallCx, Decline, Emitter, Plan, Registry, Variant};

/// A real variant whose emit fails when `fail` is set.
struct Sabotaged {
    inner: Box<dyn Variant>,
    fail: bool,
}

impl Variant for Sabotaged {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn priority(&self) -> u8 {
        self.inner.priority()
    }
    fn family(&self) -> Family {
        self.inner.family()
    }
    fn honours(&self) -> &'static [tirx_ir::op::ConfigKey] {
        self.inner.honours()
    }
    fn min_arch(&self) -> tirx_ir::Arch {
        self.inner.min_arch()
    }
    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        self.inner.plan(cx)
    }
    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        self.inner.emit(plan, cx, em)?;
        if self.fail {
            return Err(Bug("sabotaged by the test".into()));
        }
        Ok(())
    }
    fn warns(&self) -> bool {
        self.inner.warns()
    }
    fn forced_only(&self) -> bool {
        self.inner.forced_only()
    }
}

/// The CUDA registry with `victim`'s emit failing.
fn sabotaged(victim: &str) -> Registry {
    let mut r = Registry::new();
    for v in Registry::cuda().into_variants() {
        let fail = v.name() == victim;
        r.register(Box::new(Sabotaged { inner: v, fail }));
    }
    r
}

/// For each variant the kernel's lowering chooses, a failing emit of that
/// variant is an internal error naming it, and nothing is lowered.
fn emit_failures_are_errors(k: &Kernel, what: &str) {
    let opts = Default::default();
    let (calls, lowered) = tirx_lower::explain_kernel(k, &opts);
    if lowered.is_err() {
        return;
    }
    let mut chosen: Vec<String> = calls.iter().filter_map(|c| c.chosen.clone()).collect();
    chosen.sort();
    chosen.dedup();
    for victim in chosen {
        match lower_with(k, &opts, &sabotaged(&victim)) {
            Ok(l) => panic!("{what}: `{victim}` failed to emit, yet lowering succeeded:\n{}", l.lir),
            Err(d) => {
                let internal: Vec<_> = d.iter().filter(|d| d.internal).collect();
                assert!(!internal.is_empty(), "{what}: `{victim}` failed to emit without an internal error: {d:?}");
                assert!(
                    internal.iter().all(|d| d.message.contains(&format!("variant `{victim}` accepted"))),
                    "{what}: {internal:?}"
                );
            }
        }
    }
}

fn examples() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<PathBuf> = [root.clone(), root.join("bench")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).expect("examples dir"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_reports_an_emit_failure_of_its_chosen_variants() {
    for path in examples() {
        let src = std::fs::read_to_string(&path).expect("read example");
        emit_failures_are_errors(&common::parse(&src), &path.display().to_string());
    }
}

fn round_trip() -> impl Strategy<Value = RoundTrip> {
    let scope = prop::sample::select(vec![("thread", 1i64), ("warp", 32), ("wg", 128), ("cta", 64), ("cta", 96)]);
    let dtype = prop::sample::select(vec!["float32", "float16", "uint8"]);
    (scope, dtype, 1i64..40, 1i64..70, prop::option::of(prop::sample::select(vec!["fallback"]))).prop_map(
        |((scope, threads), dtype, rows, cols, forced)| {
            let mut t = RoundTrip::full(scope, threads, &[rows, cols], dtype);
            t.dispatch = forced;
            t
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_round_trips_report_an_emit_failure_of_their_chosen_variants(t in round_trip()) {
        let src = t.script();
        emit_failures_are_errors(&common::parse(&src), &src);
    }
}
