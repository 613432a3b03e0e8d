//! Resource limits of the front end (issue 18, item 3): inputs that used to
//! allocate gigabytes, take seconds or produce one error per character are
//! rejected at once, with one diagnostic at the expression at fault.

use std::time::{Duration, Instant};
use tirx_ir::diag::line_col;
use tirx_ir::Diagnostic;

/// The diagnostics of `src`, and how long parsing took.
fn errors(src: &str) -> (Vec<Diagnostic>, Duration) {
    let t = Instant::now();
    let d = tirx_script::parse_kernel("limits.py", src).err().unwrap_or_default();
    (d, t.elapsed())
}

fn find<'d>(diags: &'d [Diagnostic], message: &str) -> &'d Diagnostic {
    diags.iter().find(|d| d.message.contains(message)).unwrap_or_else(|| panic!("no `{message}` in {diags:#?}"))
}

/// `x = [[0] * 60000] * 60000` is 3.6e9 items: it used to be built (and abort)
/// before the 65,536-item limit was checked.
#[test]
fn a_repeated_large_list_fails_before_it_is_built() {
    let src = "x = [[0] * 60000] * 60000\n";
    let (d, took) = errors(src);
    let e = find(&d, "value too large");
    assert_eq!(line_col(src, e.span().lo as usize), (1, 5));
    assert_eq!(e.span().hi as usize, src.len() - 1, "the whole product expression");
    assert!(e.help.as_deref().is_some_and(|h| h.contains("65536")), "{e:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[test]
fn large_values_built_other_ways_fail_at_their_expression() {
    for (src, at) in [
        // A comprehension of large items.
        ("x = [[0] * 60000 for i in range(60000)]\n", (1, 6)),
        // Items that are each within the limit but not together.
        ("a = [0] * 40000\nx = (a, a)\n", (2, 9)),
        ("a = [0] * 40000\nx = a + a\n", (2, 5)),
        ("a = [0] * 40000\nx = [*a, *a]\n", (2, 10)),
    ] {
        let (d, took) = errors(src);
        let e = find(&d, "value too large");
        assert_eq!(line_col(src, e.span().lo as usize), at, "{src}");
        assert!(took < Duration::from_secs(2), "{src}: took {took:?}");
    }
    // Half a million characters split into a tuple of one-character strings.
    let mut strings = String::from("s = 'abcdefghijklmnop'\n");
    strings.push_str(&"s = s + s\n".repeat(15));
    strings.push_str("t = tuple(s)\n");
    let (d, _) = errors(&strings);
    assert_eq!(line_col(&strings, find(&d, "value too large").span().lo as usize), (17, 11));
}

/// Small results, large work: copying a 60,000-item constant 60,000 times.
#[test]
fn compile_time_work_is_bounded() {
    let src = "a = [0] * 60000\nx = [len(a) for i in range(60000)]\n";
    let (d, took) = errors(src);
    let e = find(&d, "too much compile-time work");
    assert_eq!(line_col(src, e.span().lo as usize).0, 2);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// 10,000 nested parentheses: one error for the nesting (not one per bracket).
#[test]
fn deep_nesting_is_reported_once() {
    let src = format!("x = {}1{}\n", "(".repeat(10_000), ")".repeat(10_000));
    let (d, took) = errors(&src);
    assert_eq!(d.len(), 1, "{:?}", d.iter().map(|d| &d.message).collect::<Vec<_>>());
    assert_eq!(d.iter().filter(|d| d.message == "brackets nested too deeply").count(), 1);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    // Unclosed: the outermost bracket, with a count of the others.
    let src = format!("x = {}1\n", "(".repeat(10_000));
    let (d, _) = errors(&src);
    let unclosed: Vec<&Diagnostic> = d.iter().filter(|d| d.message.starts_with("unclosed")).collect();
    assert_eq!(unclosed.len(), 1, "{unclosed:?}");
    assert_eq!(line_col(&src, unclosed[0].span().lo as usize), (1, 5));
    assert!(unclosed[0].notes.iter().any(|n| n.contains("9999 more brackets")), "{unclosed:?}");
    // 4,000 statements each nested past the parser's limit: one error, not 4,000.
    let src = format!("x = {}1{}\n", "(".repeat(150), ")".repeat(150)).repeat(4000);
    let (d, took) = errors(&src);
    assert_eq!(d.iter().filter(|d| d.message.contains("nested too deeply")).count(), 1);
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// 4,000 lines `xN = undefined_N` used to take 10 s in "did you mean" (every
/// unknown name measured against every name defined so far).
#[test]
fn did_you_mean_is_bounded() {
    // 1000 are reported (`MAX_DIAGS`), then "stopped".
    let src: String = (0..4000).map(|i| format!("x{i} = undefined_{i}\n")).collect();
    let (d, took) = errors(&src);
    assert_eq!(d.iter().filter(|d| d.message.starts_with("unknown name")).count(), tirx_script::MAX_DIAGS);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    // Same-length names defeat a length filter: still bounded.
    let src: String = (0..4000).map(|i| format!("v{i:04} = u{i:04}\n")).collect();
    let (d, took) = errors(&src);
    assert_eq!(d.len(), tirx_script::MAX_DIAGS + 1);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    // The first errors still get their suggestion.
    let src = "lane_id = 1\nx = lane_idd\n";
    let (d, _) = errors(src);
    assert_eq!(find(&d, "unknown name `lane_idd`").help.as_deref(), Some("did you mean `lane_id`?"));
}

/// A megabyte of `$` was a million diagnostics (16 MiB: 6 GB and a minute in
/// `tirx check`); each stage now stops after `MAX_DIAGS` and says so once.
#[test]
fn each_stage_stops_after_max_diags() {
    let max = tirx_script::MAX_DIAGS;
    for (src, what) in
        [("$".repeat(1 << 20), "lexer"), ("x x\n".repeat(100_000), "parser"), ("x = y\n".repeat(100_000), "builder")]
    {
        let (d, took) = errors(&src);
        assert!(d.len() <= 2 * max + 1, "{what}: {} diagnostics", d.len());
        assert_eq!(d.iter().filter(|d| d.message == tirx_script::STOPPED).count(), 1, "{what}");
        assert!(took < Duration::from_secs(5), "{what}: took {took:?}");
    }
}
