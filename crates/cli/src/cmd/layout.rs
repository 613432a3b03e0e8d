//! `tirx layout EXPR ...`: inspect a layout expression.
//!
//! The steps run as a pipeline on one layout: parse → `--slice` (the shape
//! becomes the region's extents) → `--canonical`; then `--scope`, `--apply`,
//! `--table` and `--svg` look at the result. With neither `--slice` nor
//! `--canonical` nor any view, the parsed layout is printed back.
//!
//! Cells of `--table`/`--svg` read `T31:1`: the owning thread (after fusion;
//! `W`/`G`/`B` for warp/warpgroup/CTA granular owners) and the register or
//! memory slot; replicas are joined by `|`. A cell shows at most
//! [`MAX_CELL_REPLICAS`] replicas, then `|+N` for the rest, and a note says so
//! (`--apply` lists all of one element): a tile is at most [`MAX_CELLS`] cells,
//! so the table and the picture stay bounded whatever the replica count
//! (`S[16384] + R[4096:1@laneid]` draws a 4 MB picture in a fraction of a second).

use crate::exit::{CmdResult, Failure};
use crate::out::errln;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use tirx_layout::{parse_layout, Axis, Coord, ExecScope, Fusion, Layout, LayoutError};

#[derive(clap::Args)]
pub struct Args {
    /// The layout expression, e.g. `S[(32,8):(1@laneid,1)]`, or a script layout
    /// expression with methods and helpers, e.g. `mma_shared_layout("float16", 3, (64, 256))`.
    pub expr: String,
    /// Logical shape of the tile, e.g. `8,16` (default: the layout size, 1-D).
    #[arg(long)]
    pub shape: Option<String>,
    /// Print every coordinate of this element, e.g. `7,15` (one line per replica).
    #[arg(long)]
    pub apply: Option<String>,
    /// Print `--apply` as JSON: a list of `{axis: value}` objects.
    #[arg(long, requires = "apply")]
    pub json: bool,
    /// Print the canonical form.
    #[arg(long)]
    pub canonical: bool,
    /// Print the execution scope the layout distributes over.
    #[arg(long)]
    pub scope: bool,
    /// Thread-axis fusion for `--canonical`, `--slice` and the table owners.
    #[arg(long, default_value = "cuda", value_parser = ["none", "cuda"])]
    pub fusion: String,
    /// Slice a region, one `begin:end` (or `index`, `:`) per dimension, e.g. `32:64,0:8`.
    #[arg(long)]
    pub slice: Option<String>,
    /// Print a grid of the tile: owning thread(s) and slot per element.
    #[arg(long)]
    pub table: bool,
    /// Write the grid as an SVG picture (cells coloured by owning thread).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Most cells `--table` / `--svg` draw.
const MAX_CELLS: i64 = 16384;

/// Most replicas one cell of `--table` / `--svg` lists; the rest are counted (`|+4092`).
const MAX_CELL_REPLICAS: usize = 4;

pub fn run(a: Args) -> CmdResult {
    let fusion = Fusion::from_name(&a.fusion).unwrap_or_default();
    let mut layout = read_layout(&a.expr)?;
    let mut shape = match &a.shape {
        Some(text) => parse_list(text, "--shape", "a positive integer", |s| s.parse::<i64>().ok().filter(|v| *v > 0))?,
        None => vec![layout.size(None).map_err(user)?],
    };
    layout.check_admits(&shape).map_err(user)?;
    let mut out = String::new();
    if let Some(text) = &a.slice {
        let region = parse_region(text, &shape)?;
        layout = layout.slice(&shape, &region, fusion).map_err(user)?;
        shape = region.iter().map(|r| r.1).collect();
    }
    if a.canonical {
        layout = layout.canonicalize(fusion).map_err(user)?;
    }
    let views = a.scope || a.apply.is_some() || a.table || a.svg.is_some();
    if a.slice.is_some() || a.canonical || !views {
        writeln!(out, "{layout}").ok();
    }
    if a.scope {
        writeln!(out, "{}", describe_scope(&layout)?).ok();
    }
    if let Some(text) = &a.apply {
        let coord = parse_list(text, "--apply", "an integer", |s| s.parse::<i64>().ok())?;
        out.push_str(&apply_text(&layout, &coord, &shape, a.json)?);
    }
    if a.table || a.svg.is_some() {
        let grid = Grid::build(&layout, &shape, fusion)?;
        if a.table {
            out.push_str(&grid.text());
            if let Some(note) = grid.note() {
                writeln!(out, "{note}").ok();
            }
        }
        if let Some(path) = &a.svg {
            std::fs::write(path, grid.svg())
                .map_err(|e| Failure::User(format!("error: cannot write {}: {e}", path.display())))?;
            if let (false, Some(note)) = (a.table, grid.note()) {
                errln!("{note}");
            }
        }
    }
    crate::out::out(&out)
}

/// The layout of `expr`: the layout text syntax (docs/layout-model.md §1.5), else
/// a script expression with the layout methods and helpers (§2.14), e.g.
/// `S[8, 64].tile_to((16, 128), (8, 64))`. When both fail, the error of the
/// reader that got further into the text is shown (the text syntax on a tie).
fn read_layout(expr: &str) -> Result<Layout, Failure> {
    let text_err = match parse_layout(expr) {
        Ok(l) => return Ok(l),
        Err(e) => e,
    };
    let diags = match tirx_script::eval_layout(expr) {
        Ok(l) => return Ok(l),
        Err(d) => d,
    };
    let furthest = diags.iter().map(|d| d.span().lo as usize).max().unwrap_or(0);
    if furthest <= text_err.offset {
        return Err(Failure::User(text_err.render(expr)));
    }
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    Err(Failure::User(tirx_ir::diag::render(&diags, "EXPR", expr, color)))
}

fn user(e: LayoutError) -> Failure {
    Failure::User(format!("error: {e}"))
}

/// The message plus `text` with a caret under byte `at`.
fn caret(flag: &str, text: &str, at: usize, message: &str) -> Failure {
    let col = text.get(..at).map_or(at, |p| p.chars().count());
    Failure::User(format!("error: {flag}: {message}\n  {text}\n  {}^", " ".repeat(col)))
}

/// Comma-separated items, each checked by `item` (`what` names a good one); errors point at the bad item.
fn parse_list<T>(text: &str, flag: &str, what: &str, item: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, Failure> {
    let mut out = Vec::new();
    let mut at = 0usize;
    for part in text.split(',') {
        let lead = part.len() - part.trim_start().len();
        match item(part.trim()) {
            Some(v) => out.push(v),
            None => {
                return Err(caret(flag, text, at + lead, &format!("expected {what}, found `{}`", part.trim())));
            }
        }
        at += part.len() + 1;
    }
    Ok(out)
}

/// `begin:end` / `index` / `:` per dimension → `(begin, extent)`.
fn parse_region(text: &str, shape: &[i64]) -> Result<Vec<(i64, i64)>, Failure> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() != shape.len() {
        return Err(caret(
            "--slice",
            text,
            0,
            &format!(
                "{} range(s) for a {}-D shape {shape:?}; give one `begin:end` per dimension",
                parts.len(),
                shape.len()
            ),
        ));
    }
    let mut at = 0usize;
    let mut region = Vec::with_capacity(parts.len());
    for (part, &size) in parts.iter().zip(shape) {
        let lead = part.len() - part.trim_start().len();
        let range = parse_range(part.trim(), size).ok_or_else(|| {
            caret(
                "--slice",
                text,
                at + lead,
                &format!("expected `begin:end` inside 0..{size}, found `{}`", part.trim()),
            )
        })?;
        region.push(range);
        at += part.len() + 1;
    }
    Ok(region)
}

fn parse_range(s: &str, size: i64) -> Option<(i64, i64)> {
    let (begin, end) = match s.split_once(':') {
        Some((b, e)) => {
            let b = if b.trim().is_empty() { 0 } else { b.trim().parse().ok()? };
            let e = if e.trim().is_empty() { size } else { e.trim().parse().ok()? };
            (b, e)
        }
        None => {
            let i: i64 = s.parse().ok()?;
            (i, i.checked_add(1)?)
        }
    };
    (0 <= begin && begin < end && end <= size).then_some((begin, end - begin))
}

fn describe_scope(layout: &Layout) -> Result<String, Failure> {
    Ok(match layout.scope().map_err(user)? {
        Some((inner, outer)) => format!("scope: {inner} in {outer}"),
        None => "scope: none (no shard iter on a thread axis)".to_string(),
    })
}

/// Thread axes first, then memory axes, each by name: `laneid=31 warpid=6 m=1`.
fn ordered(c: &Coord) -> Vec<(Axis, i64)> {
    let mut v: Vec<(Axis, i64)> = c.iter().map(|(a, v)| (*a, *v)).collect();
    v.sort_by_key(|(a, _)| (a.is_memory(), *a));
    v
}

fn apply_text(layout: &Layout, coord: &[i64], shape: &[i64], json: bool) -> Result<String, Failure> {
    let set = layout.apply_set(coord, shape).map_err(user)?;
    if json {
        let list: Vec<serde_json::Value> = set
            .iter()
            .map(|c| serde_json::Value::Object(c.iter().map(|(a, v)| (a.name().to_string(), (*v).into())).collect()))
            .collect();
        let text = serde_json::to_string(&list).map_err(|e| Failure::Internal(e.to_string()))?;
        return Ok(format!("{text}\n"));
    }
    let mut out = String::new();
    for c in &set {
        let line: Vec<String> = ordered(c).iter().map(|(a, v)| format!("{a}={v}")).collect();
        writeln!(out, "{}", line.join(" ")).ok();
    }
    Ok(out)
}

/// The labelled cells of the tile, rows × columns (leading dims folded into rows).
struct Grid {
    rows: Vec<String>,
    cols: i64,
    cells: Vec<Cell>,
}

struct Cell {
    label: String,
    /// Owning thread id of the first replica, for colouring.
    owner: Option<i64>,
    /// Replicas of the element (the label lists at most [`MAX_CELL_REPLICAS`]).
    replicas: i64,
}

impl Grid {
    fn build(layout: &Layout, shape: &[i64], fusion: Fusion) -> Result<Grid, Failure> {
        let total = shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d)).unwrap_or(i64::MAX);
        if total > MAX_CELLS {
            return Err(Failure::User(format!(
                "error: the tile has {total} elements, more than the {MAX_CELLS} a grid shows; pick a region with --slice"
            )));
        }
        let cols = if shape.len() >= 2 { shape[shape.len() - 1] } else { total };
        let lead = &shape[..shape.len().saturating_sub(1)];
        let rows: Vec<String> = if shape.len() >= 2 { index_labels(lead) } else { vec![String::new()] };
        let mut cells = Vec::with_capacity(total as usize);
        for x in 0..total {
            let coord = unflatten(x, shape);
            let (set, replicas) = layout.apply_first(&coord, shape, MAX_CELL_REPLICAS).map_err(user)?;
            cells.push(Cell::of(layout, &set, replicas, fusion)?);
        }
        Ok(Grid { rows, cols, cells })
    }

    /// Says that cells list only some of their replicas, when they do.
    fn note(&self) -> Option<String> {
        let most = self.cells.iter().map(|c| c.replicas).max()?;
        (most > MAX_CELL_REPLICAS as i64).then(|| {
            format!(
                "note: elements have up to {most} replicas; cells list the first {MAX_CELL_REPLICAS} and count the \
                 rest (`|+N`); `--apply I,J` lists all of one element"
            )
        })
    }

    fn text(&self) -> String {
        let width = self.cells.iter().map(|c| c.label.len()).max().unwrap_or(1).max(self.cols.to_string().len());
        let row_w = self.rows.iter().map(String::len).max().unwrap_or(0);
        // Padding by hand: `{:>width$}` panics for widths over u16::MAX.
        let pad = |out: &mut String, text: &str, w: usize| {
            out.extend(std::iter::repeat_n(' ', w.saturating_sub(text.len())));
            out.push_str(text);
        };
        let mut out = String::new();
        pad(&mut out, "", row_w);
        out.push(' ');
        for c in 0..self.cols {
            out.push(' ');
            pad(&mut out, &c.to_string(), width);
        }
        out.push('\n');
        for (r, label) in self.rows.iter().enumerate() {
            pad(&mut out, label, row_w);
            out.push(' ');
            for c in 0..self.cols as usize {
                out.push(' ');
                pad(&mut out, &self.cells[r * self.cols as usize + c].label, width);
            }
            out.push('\n');
        }
        out
    }

    fn svg(&self) -> String {
        let chars = self.cells.iter().map(|c| c.label.len()).max().unwrap_or(1).max(3);
        let (cw, ch) = (chars as i64 * 7 + 10, 20i64);
        let row_w = self.rows.iter().map(String::len).max().unwrap_or(0) as i64 * 7 + 12;
        let (w, h) = (row_w + cw * self.cols, ch * (self.rows.len() as i64 + 1));
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"monospace\" font-size=\"11\">\n"
        );
        for c in 0..self.cols {
            let x = row_w + c * cw + cw / 2;
            writeln!(out, "<text x=\"{x}\" y=\"14\" text-anchor=\"middle\">{c}</text>").ok();
        }
        for (r, label) in self.rows.iter().enumerate() {
            let y = ch * (r as i64 + 1);
            writeln!(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", row_w - 6, y + 14, xml(label)).ok();
            for c in 0..self.cols {
                let cell = &self.cells[r * self.cols as usize + c as usize];
                let x = row_w + c * cw;
                writeln!(
                    out,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{cw}\" height=\"{ch}\" fill=\"{}\" stroke=\"#888\" stroke-width=\"0.5\"/>\
                     <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    colour(cell.owner),
                    x + cw / 2,
                    y + 14,
                    xml(&cell.label)
                )
                .ok();
            }
        }
        out.push_str("</svg>\n");
        out
    }
}

impl Cell {
    /// `set`: the first replicas of an element that has `replicas` in all.
    fn of(layout: &Layout, set: &[Coord], replicas: i64, fusion: Fusion) -> Result<Cell, Failure> {
        let mut labels = Vec::with_capacity(set.len());
        let mut owner = None;
        for c in set {
            let fused = layout.tile().fuse_coord(c, fusion).map_err(user)?;
            let (who, id) = owner_label(&fused);
            owner = owner.or(id);
            let slot = slot_label(&fused);
            labels.push(match who {
                Some(w) => format!("{w}:{slot}"),
                None => slot,
            });
        }
        let listed = set.len() as i64;
        if replicas > listed {
            labels.push(format!("+{}", replicas - listed));
        }
        Ok(Cell { label: labels.join("|"), owner, replicas })
    }
}

/// `T31` for one thread axis (letter by its granularity), `cbx1.tx3` for several.
fn owner_label(c: &Coord) -> (Option<String>, Option<i64>) {
    let threads: Vec<(Axis, i64)> = c.iter().filter(|(a, _)| a.is_thread()).map(|(a, v)| (*a, *v)).collect();
    match threads.as_slice() {
        [] => (None, None),
        [(axis, v)] => {
            let letter = match axis.scopes().map(|s| s.1) {
                Some(ExecScope::Warp) => "W",
                Some(ExecScope::Warpgroup) => "G",
                Some(ExecScope::Cta) => "B",
                _ => "T",
            };
            (Some(format!("{letter}{v}")), Some(*v))
        }
        many => {
            let text = many.iter().map(|(a, v)| format!("{a}{v}")).collect::<Vec<_>>().join(".");
            (Some(text), many.last().map(|(_, v)| *v))
        }
    }
}

/// `1` for `m` alone, else `L69,C1` style (TLane, TCol, P, F, Bank, m).
fn slot_label(c: &Coord) -> String {
    let mem: Vec<(Axis, i64)> = c.iter().filter(|(a, _)| a.is_memory()).map(|(a, v)| (*a, *v)).collect();
    match mem.as_slice() {
        [] => "0".to_string(),
        [(Axis::M, v)] => v.to_string(),
        many => many
            .iter()
            .map(|(a, v)| {
                let short = match a {
                    Axis::TLane => "L",
                    Axis::TCol => "C",
                    Axis::Bank => "B",
                    other => other.name(),
                };
                format!("{short}{v}")
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// Row-major multi-index of flat index `x` in `shape` (positive extents).
pub(crate) fn unflatten(mut x: i64, shape: &[i64]) -> Vec<i64> {
    let mut c = vec![0; shape.len()];
    for (d, &e) in shape.iter().enumerate().rev() {
        c[d] = x % e;
        x /= e;
    }
    c
}

/// Row labels for the folded leading dims: `5` or `(1, 3)`.
fn index_labels(lead: &[i64]) -> Vec<String> {
    let n: i64 = lead.iter().product();
    (0..n)
        .map(|r| {
            let idx = unflatten(r, lead);
            if idx.len() == 1 {
                idx[0].to_string()
            } else {
                format!("({})", idx.iter().map(i64::to_string).collect::<Vec<_>>().join(", "))
            }
        })
        .collect()
}

/// A distinct pastel per owner (golden-angle hue steps); white when unowned.
fn colour(owner: Option<i64>) -> String {
    match owner {
        Some(t) => format!("hsl({}, 65%, 78%)", (t.rem_euclid(4096) * 137) % 360),
        None => "#ffffff".to_string(),
    }
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
