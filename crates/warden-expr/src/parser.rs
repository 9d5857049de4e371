//! The grammar of conditions (FR-4 and the research document), lowest precedence first:
//!
//! ```text
//! expr    := or
//! or      := and ( ("or" | "||") and )*
//! and     := not ( ("and" | "&&") not )*
//! not     := "not" not | cmp                       -- Python: `not a > b` is `not (a > b)`
//! cmp     := sum ( ("<"|"<="|">"|">="|"=="|"!="|"in"|"not" "in") sum )?
//! sum     := product ( ("+"|"-") product )*
//! product := unary ( ("*"|"/") unary )*
//! unary   := ("-" | "!") unary | postfix            -- `!` binds tightly, as in Rust
//! postfix := primary ( "." name | "." name "(" args ")" | "[" expr "]" )*
//! primary := literal | name | name "(" args ")" | "(" expr ")" | "[" (expr ("," expr)*)? "]"
//! args    := expr "for" name "in" expr ("if" expr)?  |  (expr ("," expr)*)?
//! ```
//!
//! A method call `x.f(a)` is the call `f(x, a)`. Chained comparisons (`a < b < c`) are refused
//! with a suggestion, rather than given a meaning that surprises either Python or Rust readers.

use crate::error::{ExprError, Span};
use crate::lexer::{Tok, lex};

/// Deepest nesting the parser accepts; deeper input is refused rather than risking the stack.
const MAX_DEPTH: usize = 64;
/// Longest expression, in tokens, the parser accepts (it bounds every recursion after parsing).
const MAX_TOKENS: usize = 2000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ExprKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Expr>),
    Name(String),
    Field(Box<Expr>, String, Span),
    Index(Box<Expr>, Box<Expr>),
    Call(String, Span, Vec<Expr>),
    Gen(Box<Generator>),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Generator {
    pub elem: Expr,
    pub var: String,
    pub var_span: Span,
    pub iter: Expr,
    pub filter: Option<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    And,
    Or,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::In => "in",
            BinOp::NotIn => "not in",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

pub(crate) fn parse(src: &str) -> Result<Expr, ExprError> {
    if src.trim().is_empty() {
        return Err(ExprError::syntax(
            Span::new(0, src.len()),
            "the expression is empty",
            Some("write a condition such as `context.turn.token_usage > 0.8`, or `true`"),
        ));
    }
    let toks = lex(src)?;
    if toks.len() > MAX_TOKENS {
        return Err(ExprError::new(
            crate::ErrorKind::Limit,
            Span::new(0, src.len()),
            format!("the expression has more than {MAX_TOKENS} tokens"),
            Some("split it into several rules, or move the logic to a script"),
        ));
    }
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
    };
    let expr = p.expr()?;
    let (tok, span) = p.peek();
    if *tok != Tok::Eof {
        let help = match tok {
            Tok::Ident(_) | Tok::Int(_) | Tok::Float(_) | Tok::Str(_) => {
                Some("join conditions with `and` or `or`")
            }
            Tok::RParen => Some("this `)` has no matching `(`"),
            _ => None,
        };
        return Err(ExprError::syntax(
            span,
            format!("unexpected {} after a complete expression", tok.describe()),
            help,
        ));
    }
    if depth(&expr) > MAX_DEPTH {
        return Err(ExprError::new(
            crate::ErrorKind::Limit,
            expr.span,
            format!("the expression nests deeper than {MAX_DEPTH} levels"),
            Some("split it, or move the logic to a script"),
        ));
    }
    Ok(expr)
}

/// Nesting depth of the tree; operator chains (`a + b + c`) count one level per operator.
fn depth(e: &Expr) -> usize {
    let children = match &e.kind {
        ExprKind::Null
        | ExprKind::Bool(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Name(_) => return 1,
        ExprKind::List(items) | ExprKind::Call(_, _, items) => items.iter().map(depth).max(),
        ExprKind::Field(b, _, _) | ExprKind::Unary(_, b) => Some(depth(b)),
        ExprKind::Index(a, b) | ExprKind::Binary(_, a, b) => Some(depth(a).max(depth(b))),
        ExprKind::Gen(g) => [Some(&g.elem), Some(&g.iter), g.filter.as_ref()]
            .into_iter()
            .flatten()
            .map(depth)
            .max(),
    };
    1 + children.unwrap_or(0)
}

struct Parser {
    toks: Vec<(Tok, Span)>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> (&Tok, Span) {
        let (t, s) = &self.toks[self.pos.min(self.toks.len() - 1)];
        (t, *s)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)].0
    }

    fn bump(&mut self) -> (Tok, Span) {
        let item = self.toks[self.pos.min(self.toks.len() - 1)].clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        item
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek().0 == tok {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &Tok, what: &str) -> Result<Span, ExprError> {
        let (found, span) = self.peek();
        if found == tok {
            Ok(self.bump().1)
        } else {
            Err(ExprError::syntax(
                span,
                format!("expected {what}, found {}", found.describe()),
                None,
            ))
        }
    }

    fn enter(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let span = self.peek().1;
            return Err(ExprError::new(
                crate::ErrorKind::Limit,
                span,
                format!("the expression nests deeper than {MAX_DEPTH} levels"),
                Some("split it, or move the logic to a script"),
            ));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, ExprError> {
        self.enter()?;
        let e = self.or();
        self.depth -= 1;
        e
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.and()?;
        while self.eat(&Tok::Or) {
            let rhs = self.and()?;
            lhs = binary(BinOp::Or, lhs, rhs);
        }
        Ok(lhs)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.not()?;
        while self.eat(&Tok::And) {
            let rhs = self.not()?;
            lhs = binary(BinOp::And, lhs, rhs);
        }
        Ok(lhs)
    }

    fn not(&mut self) -> Result<Expr, ExprError> {
        let (tok, span) = self.peek();
        if *tok == Tok::Not {
            self.bump();
            self.enter()?;
            let inner = self.not();
            self.depth -= 1;
            let inner = inner?;
            let span = span.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Unary(UnOp::Not, Box::new(inner)),
                span,
            });
        }
        self.cmp()
    }

    fn cmp_op(&mut self) -> Option<BinOp> {
        let op = match self.peek().0 {
            Tok::Lt => BinOp::Lt,
            Tok::Le => BinOp::Le,
            Tok::Gt => BinOp::Gt,
            Tok::Ge => BinOp::Ge,
            Tok::EqEq => BinOp::Eq,
            Tok::Ne => BinOp::Ne,
            Tok::In => BinOp::In,
            Tok::Not if *self.peek_at(1) == Tok::In => {
                self.bump();
                BinOp::NotIn
            }
            _ => return None,
        };
        self.bump();
        Some(op)
    }

    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let lhs = self.sum()?;
        let Some(op) = self.cmp_op() else {
            return Ok(lhs);
        };
        let rhs = self.sum()?;
        let op_span = self.peek().1;
        if let Some(second) = self.cmp_op() {
            return Err(ExprError::syntax(
                op_span,
                format!("chained comparison `{} {}`", op.symbol(), second.symbol()),
                Some("compare twice and join with `and`: `a < b and b < c`"),
            ));
        }
        Ok(binary(op, lhs, rhs))
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.product()?;
        loop {
            let op = match self.peek().0 {
                Tok::Plus => BinOp::Add,
                Tok::Minus => BinOp::Sub,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.product()?;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek().0 {
                Tok::Star => BinOp::Mul,
                Tok::Slash => BinOp::Div,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.unary()?;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        let (tok, span) = self.peek();
        let op = match tok {
            Tok::Minus => UnOp::Neg,
            Tok::Bang => UnOp::Not,
            _ => return self.postfix(),
        };
        self.bump();
        self.enter()?;
        let inner = self.unary();
        self.depth -= 1;
        let inner = inner?;
        // Fold negative literals so `-9223372036854775808`-style bounds and `-0.5` stay literals.
        let kind = match (op, &inner.kind) {
            (UnOp::Neg, ExprKind::Int(n)) if n.checked_neg().is_some() => ExprKind::Int(-n),
            (UnOp::Neg, ExprKind::Float(f)) => ExprKind::Float(-f),
            _ => ExprKind::Unary(op, Box::new(inner.clone())),
        };
        Ok(Expr {
            kind,
            span: span.to(inner.span),
        })
    }

    fn postfix(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.primary()?;
        loop {
            match self.peek().0 {
                Tok::Dot => {
                    self.bump();
                    let (tok, name_span) = self.bump();
                    let name = match tok {
                        Tok::Ident(n) => n,
                        // `x.in`, `x.not`... are field names too in free-form data.
                        Tok::And => "and".into(),
                        Tok::Or => "or".into(),
                        Tok::Not => "not".into(),
                        Tok::In => "in".into(),
                        Tok::For => "for".into(),
                        Tok::If => "if".into(),
                        Tok::Int(n) => {
                            return Err(ExprError::syntax(
                                name_span,
                                format!("`.{n}` is not a field name"),
                                Some(&format!("to take an item of a list, write `[{n}]`")),
                            ));
                        }
                        other => {
                            return Err(ExprError::syntax(
                                name_span,
                                format!(
                                    "expected a field name after `.`, found {}",
                                    other.describe()
                                ),
                                None,
                            ));
                        }
                    };
                    if *self.peek().0 == Tok::LParen {
                        self.bump();
                        let mut args = vec![e];
                        args.extend(self.args()?);
                        let end = self.expect(&Tok::RParen, "`)` to close the call")?;
                        let span = args[0].span.to(end);
                        e = Expr {
                            kind: ExprKind::Call(name, name_span, args),
                            span,
                        };
                    } else {
                        let span = e.span.to(name_span);
                        e = Expr {
                            kind: ExprKind::Field(Box::new(e), name, name_span),
                            span,
                        };
                    }
                }
                Tok::LBracket => {
                    self.bump();
                    let idx = self.expr()?;
                    let end = self.expect(&Tok::RBracket, "`]`")?;
                    let span = e.span.to(end);
                    e = Expr {
                        kind: ExprKind::Index(Box::new(e), Box::new(idx)),
                        span,
                    };
                }
                Tok::LParen => {
                    return Err(ExprError::syntax(
                        self.peek().1,
                        "only named functions can be called",
                        Some("write `name(...)` or `value.name(...)`"),
                    ));
                }
                _ => return Ok(e),
            }
        }
    }

    fn args(&mut self) -> Result<Vec<Expr>, ExprError> {
        let mut args = Vec::new();
        if *self.peek().0 == Tok::RParen {
            return Ok(args);
        }
        let first = self.expr()?;
        if *self.peek().0 == Tok::For {
            self.bump();
            let (tok, var_span) = self.bump();
            let Tok::Ident(var) = tok else {
                return Err(ExprError::syntax(
                    var_span,
                    format!(
                        "expected a variable name after `for`, found {}",
                        tok.describe()
                    ),
                    Some("write `any(t.success for t in context.history.tools)`"),
                ));
            };
            self.expect(&Tok::In, "`in`")?;
            let iter = self.or()?;
            let filter = if self.eat(&Tok::If) {
                Some(self.or()?)
            } else {
                None
            };
            let span = first.span.to(filter.as_ref().map_or(iter.span, |f| f.span));
            args.push(Expr {
                kind: ExprKind::Gen(Box::new(Generator {
                    elem: first,
                    var,
                    var_span,
                    iter,
                    filter,
                })),
                span,
            });
            return Ok(args);
        }
        args.push(first);
        while self.eat(&Tok::Comma) {
            args.push(self.expr()?);
        }
        Ok(args)
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let (tok, span) = self.bump();
        let kind = match tok {
            Tok::Null => ExprKind::Null,
            Tok::True => ExprKind::Bool(true),
            Tok::False => ExprKind::Bool(false),
            Tok::Int(n) => ExprKind::Int(n),
            Tok::Float(f) => ExprKind::Float(f),
            Tok::Str(s) => ExprKind::Str(s),
            Tok::Ident(name) => {
                if *self.peek().0 == Tok::LParen {
                    self.bump();
                    let args = self.args()?;
                    let end = self.expect(&Tok::RParen, "`)` to close the call")?;
                    return Ok(Expr {
                        kind: ExprKind::Call(name, span, args),
                        span: span.to(end),
                    });
                }
                ExprKind::Name(name)
            }
            Tok::LParen => {
                let inner = self.expr()?;
                let end = self.expect(&Tok::RParen, "`)`")?;
                return Ok(Expr {
                    kind: inner.kind,
                    span: span.to(end),
                });
            }
            Tok::LBracket => {
                let mut items = Vec::new();
                if *self.peek().0 != Tok::RBracket {
                    items.push(self.expr()?);
                    while self.eat(&Tok::Comma) {
                        if *self.peek().0 == Tok::RBracket {
                            break;
                        }
                        items.push(self.expr()?);
                    }
                }
                let end = self.expect(&Tok::RBracket, "`]` to close the list")?;
                return Ok(Expr {
                    kind: ExprKind::List(items),
                    span: span.to(end),
                });
            }
            other => {
                let help = match other {
                    Tok::Eof => Some("the expression ends too early"),
                    Tok::And | Tok::Or => Some("`and`/`or` need a condition on both sides"),
                    _ => None,
                };
                return Err(ExprError::syntax(
                    span,
                    format!("expected a value, found {}", other.describe()),
                    help,
                ));
            }
        };
        Ok(Expr { kind, span })
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span.to(rhs.span);
    Expr {
        kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact, fully parenthesised rendering of the tree, for asserting precedence.
    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Null => "null".into(),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Int(n) => n.to_string(),
            ExprKind::Float(f) => format!("{f:?}"),
            ExprKind::Str(s) => format!("'{s}'"),
            ExprKind::List(items) => {
                format!(
                    "[{}]",
                    items.iter().map(show).collect::<Vec<_>>().join(", ")
                )
            }
            ExprKind::Name(n) => n.clone(),
            ExprKind::Field(b, n, _) => format!("{}.{n}", show(b)),
            ExprKind::Index(b, i) => format!("{}[{}]", show(b), show(i)),
            ExprKind::Call(f, _, args) => {
                format!(
                    "{f}({})",
                    args.iter().map(show).collect::<Vec<_>>().join(", ")
                )
            }
            ExprKind::Gen(g) => format!(
                "{} for {} in {}{}",
                show(&g.elem),
                g.var,
                show(&g.iter),
                g.filter
                    .as_ref()
                    .map(|f| format!(" if {}", show(f)))
                    .unwrap_or_default()
            ),
            ExprKind::Unary(UnOp::Neg, e) => format!("(-{})", show(e)),
            ExprKind::Unary(UnOp::Not, e) => format!("(not {})", show(e)),
            ExprKind::Binary(op, a, b) => format!("({} {} {})", show(a), op.symbol(), show(b)),
        }
    }

    fn p(src: &str) -> String {
        show(&parse(src).unwrap_or_else(|e| panic!("{src}: {e}")))
    }

    #[test]
    fn precedence_follows_python() {
        assert_eq!(p("not a > b"), "(not (a > b))");
        assert_eq!(p("not a and b"), "((not a) and b)");
        assert_eq!(p("a or b and c"), "(a or (b and c))");
        assert_eq!(
            p("a + b * c > d - e / f"),
            "((a + (b * c)) > (d - (e / f)))"
        );
        assert_eq!(p("!a == b"), "((not a) == b)");
        assert_eq!(p("'x' not in y"), "('x' not in y)");
    }

    #[test]
    fn seed_conditions_parse() {
        assert_eq!(
            p("context.turn.token_usage > 0.8 and context.history.tool_count > 5"),
            "((context.turn.token_usage > 0.8) and (context.history.tool_count > 5))"
        );
        assert_eq!(
            p("context_above_threshold(0.8) or tool_completed('vault_search')"),
            "(context_above_threshold(0.8) or tool_completed('vault_search'))"
        );
        assert_eq!(p("result.count > 6"), "(result.count > 6)");
        assert_eq!(p("context.state.get('k')"), "get(context.state, 'k')");
    }

    #[test]
    fn generators_and_lists() {
        assert_eq!(
            p("any(t.name == 'x' for t in context.history.tools if t.success)"),
            "any((t.name == 'x') for t in context.history.tools if t.success)"
        );
        assert_eq!(p("len([1, 2, 3,])"), "len([1, 2, 3])");
        assert_eq!(p("-3 - -x"), "(-3 - (-x))");
    }

    #[test]
    fn refusals_explain_themselves() {
        let e = parse("a < b < c").unwrap_err();
        assert!(e.help().unwrap().contains("and"));
        let e = parse("a b").unwrap_err();
        assert!(e.help().unwrap().contains("and"));
        let e = parse("").unwrap_err();
        assert!(e.message().contains("empty"));
        let e = parse("(a").unwrap_err();
        assert!(e.message().contains("`)`"));
        let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert_eq!(parse(&deep).unwrap_err().kind(), crate::ErrorKind::Limit);
        let nots = "not ".repeat(200) + "true";
        assert_eq!(parse(&nots).unwrap_err().kind(), crate::ErrorKind::Limit);
    }
}
