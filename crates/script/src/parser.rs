//! Recursive-descent parser (precedence climbing for expressions) from tokens
//! to [`crate::ast`]. On a syntax error it reports, skips to the end of the
//! statement (and over any block that statement opened) and carries on, so one
//! run reports every independent error.

use crate::ast::*;
use crate::lexer::{Tok, Token};
use tirx_ir::{Diagnostic, Span};

/// Deepest nesting of expressions / blocks accepted (guards the recursion of
/// every later pass over the tree).
pub const MAX_DEPTH: usize = 100;

const KEYWORDS: [&str; 24] = [
    "def", "for", "in", "if", "elif", "else", "while", "and", "or", "not", "True", "False", "None", "from", "import",
    "as", "pass", "return", "with", "lambda", "is", "class", "break", "continue",
];

pub fn parse(tokens: Vec<Token>, diags: &mut Vec<Diagnostic>) -> Vec<Stmt> {
    let mut p = Parser { toks: tokens, pos: 0, depth: 0, deep_reported: false, diags };
    let mut out = vec![];
    while !p.at(&Tok::Eof) {
        if p.too_many() {
            break;
        }
        if p.eat(&Tok::Newline) {
            continue;
        }
        if p.at(&Tok::Indent) || p.at(&Tok::Dedent) {
            let sp = p.span();
            p.error(Diagnostic::error(sp, "unexpected indentation").with_help("remove the leading spaces"));
            p.skip_block_or_token();
            continue;
        }
        p.statement(&mut out);
    }
    out
}

struct Parser<'d> {
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    /// "nested too deeply" was reported (once per file).
    deep_reported: bool,
    diags: &'d mut Vec<Diagnostic>,
}

type PResult<T> = Result<T, ()>;

impl Parser<'_> {
    fn tok(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].tok
    }
    fn peek_tok(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].tok
    }
    fn span(&self) -> Span {
        self.toks[self.pos.min(self.toks.len() - 1)].span
    }
    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1).min(self.toks.len() - 1)].span
    }
    fn at(&self, t: &Tok) -> bool {
        self.tok() == t
    }
    fn at_op(&self, op: &str) -> bool {
        matches!(self.tok(), Tok::Op(o) if *o == op)
    }
    fn at_kw(&self, kw: &str) -> bool {
        matches!(self.tok(), Tok::Name(n) if n == kw)
    }
    /// Consumes the current token; returns its span.
    fn bump(&mut self) -> Span {
        let sp = self.span();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        sp
    }
    fn eat(&mut self, t: &Tok) -> bool {
        if self.at(t) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn eat_op(&mut self, op: &str) -> bool {
        if self.at_op(op) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.at_kw(kw) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// [`crate::MAX_DIAGS`] reached: says so once and skips to the end of the tokens.
    fn too_many(&mut self) -> bool {
        if self.diags.len() < crate::MAX_DIAGS {
            return false;
        }
        let at = self.span();
        crate::stop_reporting(self.diags, at);
        self.pos = self.toks.len() - 1;
        true
    }

    fn describe(t: &Tok) -> String {
        match t {
            Tok::Name(n) => format!("`{n}`"),
            Tok::Int(v) => format!("`{v}`"),
            Tok::Float(v) => format!("`{v}`"),
            Tok::Str(_) => "a string".into(),
            Tok::Op(o) => format!("`{o}`"),
            Tok::Newline => "end of line".into(),
            Tok::Indent => "an indented block".into(),
            Tok::Dedent => "end of block".into(),
            Tok::Eof => "end of file".into(),
        }
    }

    fn expected<T>(&mut self, what: &str) -> PResult<T> {
        let found = Self::describe(self.tok());
        let sp = self.span();
        self.error(
            Diagnostic::error(sp, format!("expected {what}, found {found}")).with_label(format!("expected {what}")),
        );
        Err(())
    }

    fn expect_op(&mut self, op: &str) -> PResult<Span> {
        if self.at_op(op) {
            Ok(self.bump())
        } else {
            self.expected(&format!("`{op}`"))
        }
    }

    fn ident(&mut self) -> PResult<(String, Span)> {
        match self.tok().clone() {
            Tok::Name(n) if !KEYWORDS.contains(&n.as_str()) => {
                let sp = self.bump();
                Ok((n, sp))
            }
            _ => self.expected("a name"),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            // Once per file, and not at all when the lexer already reported the
            // brackets: one deeply nested expression is one error.
            if !self.deep_reported && !self.diags.iter().any(|d| d.message == crate::lexer::BRACKETS_TOO_DEEP) {
                let sp = self.span();
                self.error(
                    Diagnostic::error(sp, "nested too deeply")
                        .with_label(format!("more than {MAX_DEPTH} levels of nesting"))
                        .with_help("split the expression or block into smaller pieces"),
                );
            }
            self.deep_reported = true;
            self.depth -= 1;
            return Err(());
        }
        Ok(())
    }
    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ---------------------------------------------------------------- statements

    /// Skips the rest of a broken statement: to its end of line, then over any
    /// indented block that belongs to it.
    fn recover(&mut self) {
        while !matches!(self.tok(), Tok::Newline | Tok::Eof) {
            if matches!(self.tok(), Tok::Indent | Tok::Dedent) {
                break;
            }
            self.bump();
        }
        self.eat(&Tok::Newline);
        if self.at(&Tok::Indent) {
            self.skip_block_or_token();
        }
    }

    /// At an Indent: skip the whole block. Otherwise skip one token.
    fn skip_block_or_token(&mut self) {
        if !self.at(&Tok::Indent) {
            self.bump();
            return;
        }
        let mut level = 0usize;
        loop {
            match self.tok() {
                Tok::Indent => level += 1,
                Tok::Dedent => {
                    level = level.saturating_sub(1);
                    if level == 0 {
                        self.bump();
                        return;
                    }
                }
                Tok::Eof => return,
                _ => {}
            }
            self.bump();
        }
    }

    fn statement(&mut self, out: &mut Vec<Stmt>) {
        let start = self.pos;
        let r = if self.at_kw("if")
            || self.at_kw("for")
            || self.at_kw("while")
            || self.at_kw("def")
            || self.at_kw("with")
            || self.at_op("@")
        {
            self.compound().map(|s| out.push(s))
        } else {
            self.simple_line(out)
        };
        if r.is_err() {
            self.recover();
        }
        if self.pos == start {
            // Never loop on a token nobody consumed.
            self.bump();
        }
    }

    fn simple_line(&mut self, out: &mut Vec<Stmt>) -> PResult<()> {
        loop {
            let s = self.small()?;
            out.push(s);
            if self.eat_op(";") {
                if matches!(self.tok(), Tok::Newline | Tok::Eof) {
                    break;
                }
                continue;
            }
            break;
        }
        if self.eat(&Tok::Newline) || self.at(&Tok::Eof) || self.at(&Tok::Dedent) {
            Ok(())
        } else {
            self.expected("end of line or `;`")
        }
    }

    fn small(&mut self) -> PResult<Stmt> {
        let lo = self.span();
        if self.eat_kw("pass") {
            return Ok(Stmt { kind: StmtKind::Pass, span: lo });
        }
        if self.eat_kw("return") {
            let v = if matches!(self.tok(), Tok::Newline | Tok::Eof) || self.at_op(";") {
                None
            } else {
                Some(self.testlist()?)
            };
            return Ok(Stmt { kind: StmtKind::Return(v), span: lo.to(self.prev_span()) });
        }
        if self.at_kw("from") {
            return self.import_from();
        }
        if self.eat_kw("import") {
            let (module, _) = self.dotted()?;
            let alias = if self.eat_kw("as") { Some(self.ident()?.0) } else { None };
            return Ok(Stmt { kind: StmtKind::Import { module, alias }, span: lo.to(self.prev_span()) });
        }
        let target = self.testlist()?;
        if self.eat_op("=") {
            let value = self.testlist()?;
            if self.at_op("=") {
                let sp = self.span();
                self.error(
                    Diagnostic::error(sp, "chained assignment is not supported")
                        .with_help("assign each name separately"),
                );
                return Err(());
            }
            let span = target.span.to(value.span);
            return Ok(Stmt { kind: StmtKind::Assign { target, value }, span });
        }
        if self.eat_op(":") {
            let annotation = self.test()?;
            let value = if self.eat_op("=") { Some(self.testlist()?) } else { None };
            let span = target.span.to(self.prev_span());
            return Ok(Stmt { kind: StmtKind::AnnAssign { target, annotation, value }, span });
        }
        let aug = [
            ("+=", BinOp::Add),
            ("-=", BinOp::Sub),
            ("*=", BinOp::Mul),
            ("/=", BinOp::Div),
            ("//=", BinOp::FloorDiv),
            ("%=", BinOp::Mod),
        ];
        for (sym, op) in aug {
            if self.eat_op(sym) {
                let value = self.testlist()?;
                let span = target.span.to(value.span);
                return Ok(Stmt { kind: StmtKind::AugAssign { target, op, value }, span });
            }
        }
        let span = target.span;
        Ok(Stmt { kind: StmtKind::Expr(target), span })
    }

    fn dotted(&mut self) -> PResult<(String, Span)> {
        let (mut name, mut sp) = self.ident()?;
        while self.eat_op(".") {
            let (n, s) = self.ident()?;
            name.push('.');
            name.push_str(&n);
            sp = sp.to(s);
        }
        Ok((name, sp))
    }

    fn import_from(&mut self) -> PResult<Stmt> {
        let lo = self.bump();
        let (module, _) = self.dotted()?;
        if !self.eat_kw("import") {
            return self.expected("`import`");
        }
        let paren = self.eat_op("(");
        let mut names = vec![];
        loop {
            if self.at_op("*") {
                let sp = self.span();
                self.error(Diagnostic::error(sp, "`import *` is not supported").with_help("import the names you use"));
                return Err(());
            }
            let (name, sp) = self.ident()?;
            let alias = if self.eat_kw("as") { Some(self.ident()?.0) } else { None };
            names.push(ImportName { name, alias, span: sp.to(self.prev_span()) });
            if !self.eat_op(",") {
                break;
            }
            if paren && self.at_op(")") {
                break;
            }
        }
        if paren {
            self.expect_op(")")?;
        }
        Ok(Stmt { kind: StmtKind::FromImport { module, names }, span: lo.to(self.prev_span()) })
    }

    fn compound(&mut self) -> PResult<Stmt> {
        let lo = self.span();
        if self.at_op("@") {
            let mut decorators = vec![];
            while self.eat_op("@") {
                decorators.push(self.test()?);
                if !self.eat(&Tok::Newline) {
                    return self.expected("end of line after the decorator");
                }
            }
            if !self.at_kw("def") {
                return self.expected("`def` after the decorator");
            }
            let mut f = self.funcdef()?;
            if let StmtKind::FuncDef { decorators: d, .. } = &mut f.kind {
                *d = decorators;
            }
            f.span = lo.to(f.span);
            return Ok(f);
        }
        if self.at_kw("def") {
            return self.funcdef();
        }
        if self.eat_kw("if") {
            return self.if_rest(lo);
        }
        if self.eat_kw("for") {
            let target = self.target_list()?;
            if !self.eat_kw("in") {
                return self.expected("`in`");
            }
            let iter = self.testlist()?;
            let head = lo.to(self.prev_span());
            let body = self.block()?;
            return Ok(Stmt { kind: StmtKind::For { target, iter, body }, span: head });
        }
        if self.eat_kw("while") {
            let cond = self.test()?;
            let head = lo.to(self.prev_span());
            let body = self.block()?;
            return Ok(Stmt { kind: StmtKind::While { cond, body }, span: head });
        }
        if self.eat_kw("with") {
            let item = self.test()?;
            if self.eat_kw("as") {
                let sp = self.prev_span();
                self.error(Diagnostic::error(sp, "`with ... as` is not supported").with_help("use plain statements"));
                return Err(());
            }
            let head = lo.to(self.prev_span());
            let body = self.block()?;
            return Ok(Stmt { kind: StmtKind::With { item, body }, span: head });
        }
        self.expected("a statement")
    }

    fn if_rest(&mut self, lo: Span) -> PResult<Stmt> {
        let cond = self.test()?;
        let head = lo.to(self.prev_span());
        let body = self.block()?;
        let orelse = if self.at_kw("elif") {
            let elo = self.bump();
            vec![self.if_rest(elo)?]
        } else if self.eat_kw("else") {
            self.block()?
        } else {
            vec![]
        };
        Ok(Stmt { kind: StmtKind::If { cond, body, orelse }, span: head })
    }

    fn funcdef(&mut self) -> PResult<Stmt> {
        let lo = self.bump();
        let (name, name_span) = self.ident()?;
        self.expect_op("(")?;
        let mut params = vec![];
        while !self.at_op(")") {
            let (pname, psp) = self.ident()?;
            let annotation = if self.eat_op(":") { Some(self.test()?) } else { None };
            if self.at_op("=") {
                let sp = self.span();
                self.error(
                    Diagnostic::error(sp, "default parameter values are not supported").with_help("remove `= ...`"),
                );
                return Err(());
            }
            params.push(Param { name: pname, annotation, span: psp.to(self.prev_span()) });
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")")?;
        if self.eat_op("->") {
            self.test()?;
        }
        let head = lo.to(self.prev_span());
        let body = self.block()?;
        Ok(Stmt { kind: StmtKind::FuncDef { decorators: vec![], name, name_span, params, body }, span: head })
    }

    /// `: simple_stmts NEWLINE` or `: NEWLINE INDENT stmt+ DEDENT`.
    fn block(&mut self) -> PResult<Vec<Stmt>> {
        self.expect_op(":")?;
        self.enter()?;
        let r = self.block_body();
        self.leave();
        r
    }

    fn block_body(&mut self) -> PResult<Vec<Stmt>> {
        let mut body = vec![];
        if !self.eat(&Tok::Newline) {
            self.simple_line(&mut body)?;
            return Ok(body);
        }
        if !self.eat(&Tok::Indent) {
            let sp = self.span();
            self.error(
                Diagnostic::error(sp, "expected an indented block")
                    .with_label("this line should be indented")
                    .with_help("indent the body of the statement (or write `pass`)"),
            );
            return Ok(body);
        }
        while !self.at(&Tok::Dedent) && !self.at(&Tok::Eof) {
            if self.too_many() {
                break;
            }
            if self.eat(&Tok::Newline) {
                continue;
            }
            if self.at(&Tok::Indent) {
                let sp = self.span();
                self.error(Diagnostic::error(sp, "unexpected indentation").with_help("align this line with the block"));
                self.skip_block_or_token();
                continue;
            }
            self.statement(&mut body);
        }
        self.eat(&Tok::Dedent);
        Ok(body)
    }

    // ---------------------------------------------------------------- expressions

    fn target_list(&mut self) -> PResult<Expr> {
        let first = self.bitor()?;
        if !self.at_op(",") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.at_kw("in") || self.at_op("=") {
                break;
            }
            items.push(self.bitor()?);
        }
        let span = items[0].span.to(self.prev_span());
        Ok(Expr { kind: ExprKind::Tuple(items), span })
    }

    /// `test (, test)* [,]` → a tuple when there is a comma.
    fn testlist(&mut self) -> PResult<Expr> {
        let first = self.test_or_star()?;
        if !self.at_op(",") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.ends_list() {
                break;
            }
            items.push(self.test_or_star()?);
        }
        let span = items[0].span.to(self.prev_span());
        Ok(Expr { kind: ExprKind::Tuple(items), span })
    }

    fn ends_list(&self) -> bool {
        matches!(self.tok(), Tok::Newline | Tok::Eof | Tok::Dedent)
            || self.at_op("=")
            || self.at_op(")")
            || self.at_op("]")
            || self.at_op(";")
            || self.at_op(":")
    }

    fn test_or_star(&mut self) -> PResult<Expr> {
        if self.at_op("*") {
            let lo = self.bump();
            let e = self.bitor()?;
            let span = lo.to(e.span);
            return Ok(Expr { kind: ExprKind::Starred(Box::new(e)), span });
        }
        self.test()
    }

    fn test(&mut self) -> PResult<Expr> {
        self.enter()?;
        let r = self.test_inner();
        self.leave();
        r
    }

    fn test_inner(&mut self) -> PResult<Expr> {
        if self.at_kw("lambda") {
            let start = self.bump();
            let mut params = vec![];
            while !self.at_op(":") {
                params.push(self.ident()?);
                if !self.at_op(":") {
                    self.expect_op(",")?;
                }
            }
            self.expect_op(":")?;
            let body = self.test()?;
            let span = start.to(body.span);
            return Ok(Expr { kind: ExprKind::Lambda(params, Box::new(body)), span });
        }
        let body = self.or_test()?;
        if self.at_kw("if") && !self.in_comprehension_if() {
            self.bump();
            let cond = self.or_test()?;
            if !self.eat_kw("else") {
                return self.expected("`else`");
            }
            let other = self.test()?;
            let span = body.span.to(other.span);
            return Ok(Expr { kind: ExprKind::IfExp(Box::new(cond), Box::new(body), Box::new(other)), span });
        }
        Ok(body)
    }

    /// Inside a comprehension `[x for x in xs if c]`, `if` is a filter, not a ternary;
    /// a ternary always has an `else` before the closing bracket.
    fn in_comprehension_if(&self) -> bool {
        let mut depth = 0i32;
        let mut i = 1;
        loop {
            match self.peek_tok(i) {
                Tok::Name(n) if n == "else" && depth == 0 => return false,
                Tok::Op("(" | "[" | "{") => depth += 1,
                Tok::Op(")" | "]" | "}") => {
                    if depth == 0 {
                        return true;
                    }
                    depth -= 1;
                }
                Tok::Newline | Tok::Eof => return true,
                _ => {}
            }
            i += 1;
        }
    }

    fn or_test(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("or", BinOp::Or)], true, Self::and_test)
    }
    fn and_test(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("and", BinOp::And)], true, Self::not_test)
    }
    fn not_test(&mut self) -> PResult<Expr> {
        if self.at_kw("not") {
            let lo = self.bump();
            self.enter()?;
            let e = self.not_test();
            self.leave();
            let e = e?;
            let span = lo.to(e.span);
            return Ok(Expr { kind: ExprKind::Unary(UnOp::Not, Box::new(e)), span });
        }
        self.comparison()
    }

    fn comparison(&mut self) -> PResult<Expr> {
        let first = self.bitor()?;
        let mut rest = vec![];
        loop {
            let op = match self.tok() {
                Tok::Op("==") => CmpOp::Eq,
                Tok::Op("!=") => CmpOp::Ne,
                Tok::Op("<") => CmpOp::Lt,
                Tok::Op("<=") => CmpOp::Le,
                Tok::Op(">") => CmpOp::Gt,
                Tok::Op(">=") => CmpOp::Ge,
                Tok::Name(n) if n == "is" || n == "in" => {
                    let sp = self.span();
                    let n = n.clone();
                    self.error(
                        Diagnostic::error(sp, format!("`{n}` comparisons are not supported"))
                            .with_help("use `==` or `!=`"),
                    );
                    return Err(());
                }
                _ => break,
            };
            self.bump();
            rest.push((op, self.bitor()?));
        }
        if rest.is_empty() {
            return Ok(first);
        }
        let span = first.span.to(rest.last().map(|r| r.1.span).unwrap_or(first.span));
        Ok(Expr { kind: ExprKind::Compare(Box::new(first), rest), span })
    }

    fn bitor(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("|", BinOp::BitOr)], false, Self::bitxor)
    }
    fn bitxor(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("^", BinOp::BitXor)], false, Self::bitand)
    }
    fn bitand(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("&", BinOp::BitAnd)], false, Self::shift)
    }
    fn shift(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("<<", BinOp::Shl), (">>", BinOp::Shr)], false, Self::arith)
    }
    fn arith(&mut self) -> PResult<Expr> {
        self.binary_chain(&[("+", BinOp::Add), ("-", BinOp::Sub)], false, Self::term)
    }
    fn term(&mut self) -> PResult<Expr> {
        self.binary_chain(
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("//", BinOp::FloorDiv), ("%", BinOp::Mod), ("@", BinOp::MatMul)],
            false,
            Self::factor,
        )
    }

    /// Left-associative chain; each link counts toward the nesting depth because
    /// it deepens the tree.
    fn binary_chain(
        &mut self,
        ops: &[(&str, BinOp)],
        keyword: bool,
        next: fn(&mut Self) -> PResult<Expr>,
    ) -> PResult<Expr> {
        let mut lhs = next(self)?;
        let mut links = 0;
        let r = loop {
            let found = ops.iter().find(|(s, _)| if keyword { self.at_kw(s) } else { self.at_op(s) });
            let Some(&(_, op)) = found else { break Ok(lhs) };
            self.bump();
            if let Err(e) = self.enter() {
                break Err(e);
            }
            links += 1;
            let rhs = match next(self) {
                Ok(r) => r,
                Err(e) => break Err(e),
            };
            let span = lhs.span.to(rhs.span);
            lhs = Expr { kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)), span };
        };
        for _ in 0..links {
            self.leave();
        }
        r
    }

    fn factor(&mut self) -> PResult<Expr> {
        let op = match self.tok() {
            Tok::Op("-") => UnOp::Neg,
            Tok::Op("+") => UnOp::Pos,
            Tok::Op("~") => UnOp::Invert,
            _ => return self.power(),
        };
        let lo = self.bump();
        self.enter()?;
        let e = self.factor();
        self.leave();
        let e = e?;
        let span = lo.to(e.span);
        // Fold `-<literal>` so that `-1` is one literal (as printed).
        if op == UnOp::Neg {
            match e.kind {
                ExprKind::Int(v) if v != i64::MIN => return Ok(Expr { kind: ExprKind::Int(-v), span }),
                ExprKind::Float(v) => return Ok(Expr { kind: ExprKind::Float(-v), span }),
                _ => {}
            }
        }
        Ok(Expr { kind: ExprKind::Unary(op, Box::new(e)), span })
    }

    fn power(&mut self) -> PResult<Expr> {
        let base = self.atom_expr()?;
        if self.eat_op("**") {
            self.enter()?;
            let exp = self.factor();
            self.leave();
            let exp = exp?;
            let span = base.span.to(exp.span);
            return Ok(Expr { kind: ExprKind::Binary(BinOp::Pow, Box::new(base), Box::new(exp)), span });
        }
        Ok(base)
    }

    fn atom_expr(&mut self) -> PResult<Expr> {
        let mut e = self.atom()?;
        let mut links = 0;
        let r = loop {
            if let Err(err) = self.enter() {
                break Err(err);
            }
            links += 1;
            if self.eat_op(".") {
                match self.ident() {
                    Ok((name, sp)) => {
                        let span = e.span.to(sp);
                        e = Expr { kind: ExprKind::Attr(Box::new(e), name, sp), span };
                    }
                    Err(err) => break Err(err),
                }
            } else if self.eat_op("(") {
                match self.call_args() {
                    Ok(args) => {
                        let span = e.span.to(self.prev_span());
                        e = Expr { kind: ExprKind::Call(Box::new(e), args), span };
                    }
                    Err(err) => break Err(err),
                }
            } else if self.eat_op("[") {
                match self.subscript_list() {
                    Ok(idx) => {
                        if let Err(err) = self.expect_op("]") {
                            break Err(err);
                        }
                        let span = e.span.to(self.prev_span());
                        e = Expr { kind: ExprKind::Subscript(Box::new(e), Box::new(idx)), span };
                    }
                    Err(err) => break Err(err),
                }
            } else {
                break Ok(e);
            }
        };
        for _ in 0..links {
            self.leave();
        }
        r
    }

    fn call_args(&mut self) -> PResult<Vec<Arg>> {
        let mut args = vec![];
        while !self.at_op(")") {
            if self.at_op("**") {
                let sp = self.span();
                self.error(
                    Diagnostic::error(sp, "`**kwargs` splats are not supported")
                        .with_help("pass keyword arguments by name"),
                );
                return Err(());
            }
            let star = self.eat_op("*");
            if !star {
                if let (Tok::Name(n), Tok::Op("=")) = (self.tok().clone(), self.peek_tok(1).clone()) {
                    let sp = self.bump();
                    self.bump();
                    let value = self.test()?;
                    args.push(Arg { name: Some((n, sp)), star: false, value });
                    if !self.eat_op(",") {
                        break;
                    }
                    continue;
                }
            }
            let value = self.test()?;
            if self.at_kw("for") {
                let comp = self.comprehension(value, CompKind::Gen)?;
                args.push(Arg { name: None, star, value: comp });
            } else {
                args.push(Arg { name: None, star, value });
            }
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op(")")?;
        Ok(args)
    }

    fn comprehension(&mut self, elt: Expr, kind: CompKind) -> PResult<Expr> {
        self.bump(); // for
        let target = self.target_list()?;
        if !self.eat_kw("in") {
            return self.expected("`in`");
        }
        let iter = self.or_test()?;
        let cond = if self.eat_kw("if") { Some(Box::new(self.or_test()?)) } else { None };
        if self.at_kw("for") {
            let sp = self.span();
            self.error(
                Diagnostic::error(sp, "nested comprehensions are not supported")
                    .with_help("use one `for` per comprehension"),
            );
            return Err(());
        }
        let span = elt.span.to(self.prev_span());
        Ok(Expr {
            kind: ExprKind::Comp { kind, elt: Box::new(elt), target: Box::new(target), iter: Box::new(iter), cond },
            span,
        })
    }

    fn subscript_list(&mut self) -> PResult<Expr> {
        let first = self.subscript()?;
        if !self.at_op(",") {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.at_op("]") {
                break;
            }
            items.push(self.subscript()?);
        }
        let span = items[0].span.to(self.prev_span());
        Ok(Expr { kind: ExprKind::Tuple(items), span })
    }

    fn subscript(&mut self) -> PResult<Expr> {
        let lo = self.span();
        let begin = if self.at_op(":") { None } else { Some(self.test_or_star()?) };
        if !self.at_op(":") {
            return begin.ok_or(());
        }
        self.bump();
        let slice_end = |p: &Self| p.at_op(",") || p.at_op("]") || p.at_op(":");
        let end = if slice_end(self) { None } else { Some(Box::new(self.test()?)) };
        let step = if self.eat_op(":") {
            if slice_end(self) {
                None
            } else {
                Some(Box::new(self.test()?))
            }
        } else {
            None
        };
        let span = lo.to(self.prev_span());
        Ok(Expr { kind: ExprKind::Slice(begin.map(Box::new), end, step), span })
    }

    fn atom(&mut self) -> PResult<Expr> {
        let t = self.tok().clone();
        let sp = self.span();
        let kind = match t {
            Tok::Int(v) => ExprKind::Int(v),
            Tok::Float(v) => ExprKind::Float(v),
            Tok::Str(s) => {
                self.bump();
                let mut s = s;
                let mut span = sp;
                // Adjacent string literals concatenate.
                while let Tok::Str(more) = self.tok().clone() {
                    s.push_str(&more);
                    span = span.to(self.bump());
                }
                return Ok(Expr { kind: ExprKind::Str(s), span });
            }
            Tok::Name(n) => match n.as_str() {
                "True" => ExprKind::Bool(true),
                "False" => ExprKind::Bool(false),
                "None" => ExprKind::None,
                _ if KEYWORDS.contains(&n.as_str()) => return self.expected("an expression"),
                _ => ExprKind::Name(n),
            },
            Tok::Op("(") => return self.paren(),
            Tok::Op("[") => return self.list(),
            Tok::Op("{") => return self.dict(),
            Tok::Op("...") => {
                self.error(Diagnostic::error(sp, "`...` is not supported").with_help("write the elided code out"));
                return Err(());
            }
            _ => return self.expected("an expression"),
        };
        self.bump();
        Ok(Expr { kind, span: sp })
    }

    fn paren(&mut self) -> PResult<Expr> {
        let lo = self.bump();
        self.enter()?;
        let r = self.paren_inner(lo);
        self.leave();
        r
    }

    fn paren_inner(&mut self, lo: Span) -> PResult<Expr> {
        if self.eat_op(")") {
            return Ok(Expr { kind: ExprKind::Tuple(vec![]), span: lo.to(self.prev_span()) });
        }
        let first = self.test_or_star()?;
        if self.at_kw("for") {
            let c = self.comprehension(first, CompKind::Gen)?;
            self.expect_op(")")?;
            return Ok(Expr { span: lo.to(self.prev_span()), ..c });
        }
        if self.eat_op(")") {
            // Parentheses only group; keep the inner span so errors point at the value.
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat_op(",") {
            if self.at_op(")") {
                break;
            }
            items.push(self.test_or_star()?);
        }
        self.expect_op(")")?;
        Ok(Expr { kind: ExprKind::Tuple(items), span: lo.to(self.prev_span()) })
    }

    fn list(&mut self) -> PResult<Expr> {
        let lo = self.bump();
        self.enter()?;
        let r = self.list_inner(lo);
        self.leave();
        r
    }

    fn dict(&mut self) -> PResult<Expr> {
        let lo = self.bump();
        self.enter()?;
        let r = self.dict_inner(lo);
        self.leave();
        r
    }

    /// `{k: v, ...}` (no comprehensions, no `**` splats).
    fn dict_inner(&mut self, lo: Span) -> PResult<Expr> {
        let mut items = vec![];
        while !self.at_op("}") {
            let key = self.test()?;
            self.expect_op(":")?;
            let value = self.test()?;
            items.push((key, value));
            if !self.eat_op(",") {
                break;
            }
        }
        self.expect_op("}")?;
        Ok(Expr { kind: ExprKind::Dict(items), span: lo.to(self.prev_span()) })
    }

    fn list_inner(&mut self, lo: Span) -> PResult<Expr> {
        let mut items = vec![];
        if !self.at_op("]") {
            let first = self.test_or_star()?;
            if self.at_kw("for") {
                let c = self.comprehension(first, CompKind::List)?;
                self.expect_op("]")?;
                return Ok(Expr { span: lo.to(self.prev_span()), ..c });
            }
            items.push(first);
            while self.eat_op(",") {
                if self.at_op("]") {
                    break;
                }
                items.push(self.test_or_star()?);
            }
        }
        self.expect_op("]")?;
        Ok(Expr { kind: ExprKind::List(items), span: lo.to(self.prev_span()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::lex;

    fn parse_ok(src: &str) -> Vec<Stmt> {
        let mut d = vec![];
        let t = lex(src, &mut d);
        let s = parse(t, &mut d);
        assert!(d.is_empty(), "{d:?}");
        s
    }

    #[test]
    fn precedence_and_slices() {
        let s = parse_ok("x = S[(8, 4):(4 @ laneid, 1)] + 2 * 3 ** 2\n");
        let StmtKind::Assign { value, .. } = &s[0].kind else { panic!() };
        let ExprKind::Binary(BinOp::Add, l, r) = &value.kind else { panic!("{value:?}") };
        assert!(matches!(l.kind, ExprKind::Subscript(..)));
        assert!(matches!(r.kind, ExprKind::Binary(BinOp::Mul, ..)));
    }

    #[test]
    fn semicolons_and_blocks() {
        let s = parse_ok("def k(a: T.handle):\n    T.a(); b = 1\n    for i in range(3): c = i\n");
        let StmtKind::FuncDef { body, params, .. } = &s[0].kind else { panic!() };
        assert_eq!(params.len(), 1);
        assert_eq!(body.len(), 3);
    }

    #[test]
    fn recovers_and_reports_each_bad_line() {
        let mut d = vec![];
        let t = lex("x = (1 +\ny = 2 2\nz = ]\nw = 1\n", &mut d);
        let s = parse(t, &mut d);
        assert!(d.len() >= 3, "{d:?}");
        assert!(s
            .iter()
            .any(|s| matches!(&s.kind, StmtKind::Assign { target, .. } if target.kind == ExprKind::Name("w".into()))));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("x = {}1{}\n", "(".repeat(150), ")".repeat(150));
        let mut d = vec![];
        let t = lex(&src, &mut d);
        parse(t, &mut d);
        assert!(!d.is_empty());
        let long = format!("x = {}\n", vec!["1"; 5000].join(" + "));
        let mut d = vec![];
        let t = lex(&long, &mut d);
        parse(t, &mut d);
        assert!(d.iter().any(|d| d.message.contains("nested too deeply")));
    }
}
