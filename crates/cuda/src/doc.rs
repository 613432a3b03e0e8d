//! C expression text that remembers its precedence ([`Doc`]), so that a parent adds
//! parentheses only where C needs them — plus a few where readers expect them (mixed operands
//! of bit operations, `&&` inside `||`, comparisons of comparisons).

use tirx_ir::lir::LBinOp;

/// C precedence levels (higher binds tighter) beside the infix ones (`LBinOp::c_infix`).
pub(crate) const TERNARY: u8 = 1;
pub(crate) const UNARY: u8 = 12;
const POSTFIX: u8 = 13;

/// A printed expression and how tightly it binds.
pub struct Doc {
    pub text: String,
    pub(crate) prec: u8,
    /// The operator when the doc is an infix binary expression.
    pub(crate) op: Option<LBinOp>,
}

impl Doc {
    pub(crate) fn atom(text: String) -> Doc {
        Doc { text, prec: POSTFIX, op: None }
    }
    pub(crate) fn unary(text: String) -> Doc {
        Doc { text, prec: UNARY, op: None }
    }
    pub(crate) fn wrap_below(self, min: u8) -> String {
        if self.prec < min {
            format!("({})", self.text)
        } else {
            self.text
        }
    }
}

fn is_bit_op(op: LBinOp) -> bool {
    matches!(op, LBinOp::BitAnd | LBinOp::BitOr | LBinOp::BitXor | LBinOp::Shl | LBinOp::Shr)
}

/// Whether operand `child` of infix `parent` (precedence `p`) is parenthesized.
fn needs_parens(parent: LBinOp, p: u8, child: &Doc, right: bool, assoc: bool) -> bool {
    // Integer `+`, `*`, `&`, `|`, `^` wrap, so regrouping them never changes a value.
    if right && assoc && child.op == Some(parent) {
        return false;
    }
    if child.prec < p || (right && child.prec == p) {
        return true;
    }
    let Some(cop) = child.op else { return false };
    let multiplicative = |o: LBinOp| matches!(o, LBinOp::Mul | LBinOp::Div | LBinOp::Rem);
    (is_bit_op(parent) && cop != parent)
        || (multiplicative(parent) && multiplicative(cop) && cop != parent)
        || (parent == LBinOp::Or && cop == LBinOp::And)
        || (parent.is_compare() && cop.is_compare())
}

/// `a sym b`; `assoc`: the operator is associative on these operands (integers).
pub(crate) fn join(a: Doc, sym: &str, b: Doc, op: LBinOp, p: u8, assoc: bool) -> Doc {
    let l = if needs_parens(op, p, &a, false, assoc) { format!("({})", a.text) } else { a.text };
    let r = if needs_parens(op, p, &b, true, assoc) { format!("({})", b.text) } else { b.text };
    Doc { text: format!("{l} {sym} {r}"), prec: p, op: Some(op) }
}

/// The bound of `for (.. ; v < bound; ..)`: `begin + extent`, parenthesized as
/// the right operand of `<` needs.
pub fn loop_bound(begin: Option<Doc>, extent: Doc) -> String {
    let (_, lt) = LBinOp::Lt.c_infix().expect("`<` is infix");
    let end = match begin {
        Some(b) => join(b, "+", extent, LBinOp::Add, LBinOp::Add.c_infix().expect("`+` is infix").1, true),
        None => extent,
    };
    end.wrap_below(lt + 1)
}

pub(crate) fn call(f: &str, args: Vec<Doc>) -> Doc {
    let args: Vec<String> = args.into_iter().map(|a| a.text).collect();
    Doc::atom(format!("{f}({})", args.join(", ")))
}

/// `(T)x` with `x` parenthesized unless it binds as tightly as a cast operand.
pub(crate) fn cast_to(t: &str, x: Doc) -> Doc {
    Doc::unary(format!("({t}){}", x.wrap_below(UNARY)))
}
