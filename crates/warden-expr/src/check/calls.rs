//! Checking calls: the built-in functions (`len`, `get`, `matches`...), methods written
//! `x.f(y)`, helpers of the schema, and the generators of `any`, `all` and `count`.

use super::*;

impl Checker<'_> {
    pub(super) fn call(
        &mut self,
        name: &str,
        name_span: Span,
        args: &[Expr],
        span: Span,
    ) -> Result<Ir, ExprError> {
        if let Some(m) = self.schema.macro_def(name) {
            if m.params.len() != args.len() {
                return Err(ExprError::new(
                    ErrorKind::UnknownFunction,
                    span,
                    format!(
                        "`{name}` takes {} argument{}, not {}",
                        m.params.len(),
                        if m.params.len() == 1 { "" } else { "s" },
                        args.len()
                    ),
                    Some(&format!("{name}({})", m.params.join(", "))),
                ));
            }
            let (params, body) = (m.params.clone(), m.body.clone());
            let mut bound = HashMap::new();
            for (p, a) in params.iter().zip(args) {
                bound.insert(p.clone(), self.check(a)?);
            }
            return self.expand(&body, bound, span);
        }
        let gen_kind = match name {
            "any" => Some(GenKind::Any),
            "all" => Some(GenKind::All),
            "count" => Some(GenKind::Count),
            "sum" => Some(GenKind::Sum),
            "min" => Some(GenKind::Min),
            "max" => Some(GenKind::Max),
            _ => None,
        };
        if let (
            Some(kind),
            [
                Expr {
                    kind: ExprKind::Gen(g),
                    ..
                },
            ],
        ) = (gen_kind, args)
        {
            return self.generator(kind, g, span);
        }
        let args = args
            .iter()
            .map(|a| self.check(a))
            .collect::<Result<Vec<_>, _>>()?;
        let arity = |lo: usize, hi: usize, usage: &str| -> Result<(), ExprError> {
            if args.len() < lo || args.len() > hi {
                Err(ExprError::new(
                    ErrorKind::UnknownFunction,
                    span,
                    format!("wrong number of arguments to `{name}`"),
                    Some(usage),
                ))
            } else {
                Ok(())
            }
        };
        let (builtin, ty) = match name {
            "len" => {
                arity(1, 1, "len(x)")?;
                self.expect(&args[0], &["list", "string", "map"], |t| {
                    matches!(t, Type::List(_) | Type::Str | Type::Map(_) | Type::Any)
                })?;
                (Builtin::Len, Type::Int)
            }
            "lower" | "upper" => {
                arity(1, 1, "lower(s)")?;
                self.expect(&args[0], &["string"], |t| {
                    matches!(t, Type::Str | Type::Any)
                })?;
                let b = if name == "lower" {
                    Builtin::Lower
                } else {
                    Builtin::Upper
                };
                (b, Type::Str)
            }
            "contains" => {
                arity(2, 2, "contains(haystack, needle)")?;
                self.expect(&args[0], &["string", "list", "map"], |t| {
                    matches!(t, Type::Str | Type::List(_) | Type::Map(_) | Type::Any)
                })?;
                (Builtin::Contains, Type::Bool)
            }
            "starts_with" | "ends_with" => {
                arity(2, 2, "starts_with(s, prefix)")?;
                for a in &args {
                    self.expect(a, &["string"], |t| matches!(t, Type::Str | Type::Any))?;
                }
                let b = if name == "starts_with" {
                    Builtin::StartsWith
                } else {
                    Builtin::EndsWith
                };
                (b, Type::Bool)
            }
            "matches" => {
                arity(2, 2, "matches(s, 'regex')")?;
                self.expect(&args[0], &["string"], |t| {
                    matches!(t, Type::Str | Type::Any)
                })?;
                let IrKind::Const(Lit::Str(pattern)) = &args[1].kind else {
                    return Err(ExprError::new(
                        ErrorKind::Type,
                        args[1].span,
                        "the pattern of `matches` must be written in the condition, as a string",
                        Some("write matches(tool.arguments.command, 'rm\\s+-rf')"),
                    ));
                };
                crate::regex::compile(pattern).map_err(|why| {
                    ExprError::new(
                        ErrorKind::Type,
                        args[1].span,
                        format!("this is not a regular expression Warden can use: {why}"),
                        Some("the syntax is Rust's `regex` crate's: no look-around or back-references"),
                    )
                })?;
                (Builtin::Matches, Type::Bool)
            }
            "abs" => {
                arity(1, 1, "abs(n)")?;
                self.expect(&args[0], &["number"], |t| t.is_numeric() || *t == Type::Any)?;
                let ty = args[0].ty.clone();
                (Builtin::Abs, ty)
            }
            "min" | "max" if args.len() >= 2 => {
                for a in &args {
                    self.expect(a, &["number", "string"], |t| {
                        t.is_numeric() || matches!(t, Type::Str | Type::Any)
                    })?;
                }
                let ty = unify(args.iter().map(|a| &a.ty));
                (
                    if name == "min" {
                        Builtin::Min
                    } else {
                        Builtin::Max
                    },
                    ty,
                )
            }
            "any" | "all" | "sum" | "min" | "max" => {
                arity(1, 1, &format!("{name}(list) or {name}(x for x in list)"))?;
                self.expect(&args[0], &["list"], |t| {
                    matches!(t, Type::List(_) | Type::Any)
                })?;
                let item = match &args[0].ty {
                    Type::List(item) => (**item).clone(),
                    _ => Type::Any,
                };
                if matches!(name, "any" | "all")
                    && !matches!(item.strip_null(), Type::Bool | Type::Any)
                {
                    return Err(self.type_error(
                        span,
                        format!(
                            "{name}(list) needs a list of true/false values; `{}` holds {}",
                            args[0].text,
                            self.type_name(&item)
                        ),
                        Some(&format!(
                            "test each item: `{name}(x.success for x in {})`",
                            args[0].text
                        )),
                    ));
                }
                match name {
                    "any" => (Builtin::AnyOf, Type::Bool),
                    "all" => (Builtin::AllOf, Type::Bool),
                    "sum" => (Builtin::SumOf, numeric_or_any(&item)),
                    "min" => (Builtin::MinOf, Type::nullable(item)),
                    _ => (Builtin::MaxOf, Type::nullable(item)),
                }
            }
            "count" => {
                return Err(ExprError::new(
                    ErrorKind::UnknownFunction,
                    span,
                    "`count` takes a generator",
                    Some("write `count(t.success for t in context.history.tools)`, or len(list)"),
                ));
            }
            "get" => {
                arity(2, 3, "get(map, key) or get(map, key, default)")?;
                return self.get(args, span);
            }
            "has" => {
                arity(2, 2, "has(map, key)")?;
                self.expect(&args[0], &["map"], |t| {
                    matches!(t, Type::Map(_) | Type::Any | Type::Record(_))
                })?;
                (Builtin::Has, Type::Bool)
            }
            "int" => {
                arity(1, 1, "int(x)")?;
                (Builtin::ToInt, Type::Int)
            }
            "float" => {
                arity(1, 1, "float(x)")?;
                (Builtin::ToFloat, Type::Float)
            }
            "str" => {
                arity(1, 1, "str(x)")?;
                (Builtin::ToStr, Type::Str)
            }
            _ => {
                let candidates = BUILTINS
                    .iter()
                    .map(|(n, _)| *n)
                    .chain(self.schema.macros.iter().map(|m| m.name.as_str()));
                let help = closest(name, candidates)
                    .map(|c| format!("did you mean `{c}`?"))
                    .unwrap_or_else(|| {
                        "see the list of functions in the conditions reference".into()
                    });
                return Err(ExprError::new(
                    ErrorKind::UnknownFunction,
                    name_span,
                    format!("unknown function `{name}`"),
                    Some(&help),
                ));
            }
        };
        Ok(self.ir(IrKind::Call(builtin, args), ty, span))
    }

    pub(super) fn get(&mut self, mut args: Vec<Ir>, span: Span) -> Result<Ir, ExprError> {
        let default = if args.len() == 3 { args.pop() } else { None };
        let key = args.pop();
        let base = args.pop();
        let (Some(base), Some(key)) = (base, key) else {
            return Err(ExprError::syntax(
                span,
                "get(map, key) needs two arguments",
                None,
            ));
        };
        self.expect(&key, &["string"], |t| matches!(t, Type::Str | Type::Any))?;
        let default =
            default.unwrap_or_else(|| self.ir(IrKind::Const(Lit::Null), Type::Null, span));
        let (value_ty, direct) = match &base.ty {
            Type::Map(v) => ((**v).clone(), None),
            Type::Any => (Type::Any, None),
            Type::Record(_) => {
                // `get` on a record with a fixed name is just the field.
                if let IrKind::Const(Lit::Str(name)) = &key.kind {
                    let name = name.clone();
                    return self.field(base, &name, span, span);
                }
                return Err(self.type_error(
                    span,
                    format!("`{}` can only be read with a fixed field name", base.text),
                    None,
                ));
            }
            other => {
                return Err(self.type_error(
                    span,
                    format!(
                        "get() reads a map; `{}` is {}",
                        base.text,
                        self.type_name(other)
                    ),
                    None,
                ));
            }
        };
        let direct = direct.or_else(|| self.direct_map(&base));
        let ty = match (&value_ty, &default.ty) {
            (v, Type::Null) => Type::nullable(v.clone()),
            (v, d) if v == d => v.clone(),
            (v, d) if v.is_numeric() && d.is_numeric() => Type::Float,
            _ => Type::Any,
        };
        Ok(self.ir(
            IrKind::Get {
                base: Box::new(base),
                key: Box::new(key),
                default: Box::new(default),
                direct,
            },
            ty,
            span,
        ))
    }

    /// The direct-read id of a map field reached through records only (for the fast path).
    pub(super) fn direct_map(&self, base: &Ir) -> Option<MapId> {
        let IrKind::Field {
            base: parent, name, ..
        } = &base.kind
        else {
            return None;
        };
        let Type::Record(id) = parent.ty else {
            return None;
        };
        self.schema.record_def(id).field(name).and_then(|f| f.map)
    }

    pub(super) fn generator(
        &mut self,
        kind: GenKind,
        g: &Generator,
        span: Span,
    ) -> Result<Ir, ExprError> {
        let iter = self.check(&g.iter)?;
        let item_ty = match &iter.ty {
            Type::List(item) => (**item).clone(),
            Type::Any => Type::Any,
            other => {
                return Err(self.type_error(
                    g.iter.span,
                    format!(
                        "`for {} in ...` needs a list; `{}` is {}",
                        g.var,
                        iter.text,
                        self.type_name(other)
                    ),
                    None,
                ));
            }
        };
        if self.schema.root_def(&g.var).is_some_and(|r| !r.hidden) {
            return Err(ExprError::new(
                ErrorKind::UnknownName,
                g.var_span,
                format!("`{}` already names part of the context", g.var),
                Some("pick another variable name, such as `t` or `item`"),
            ));
        }
        let rhai_name = format!("w_v{}", self.next_var);
        self.next_var += 1;
        self.vars.push((g.var.clone(), rhai_name.clone(), item_ty));
        let elem = self.check(&g.elem);
        let filter = g.filter.as_ref().map(|f| self.check(f)).transpose();
        self.vars.pop();
        let (elem, filter) = (elem?, filter?);
        if let Some(f) = &filter {
            self.expect_bool(f, "the `if` filter")?;
        }
        let ty = match kind {
            GenKind::Any | GenKind::All | GenKind::Count => {
                self.expect_bool(&elem, "each item of any/all/count")?;
                if kind == GenKind::Count {
                    Type::Int
                } else {
                    Type::Bool
                }
            }
            GenKind::Sum => {
                self.expect(&elem, &["number"], |t| t.is_numeric() || *t == Type::Any)?;
                numeric_or_any(&elem.ty)
            }
            GenKind::Min | GenKind::Max => {
                self.expect(&elem, &["number", "string"], |t| {
                    t.is_numeric() || matches!(t, Type::Str | Type::Any)
                })?;
                Type::nullable(elem.ty.clone())
            }
        };
        Ok(self.ir(
            IrKind::Gen {
                kind,
                var: rhai_name,
                iter: Box::new(iter),
                elem: Box::new(elem),
                filter: filter.map(Box::new),
            },
            ty,
            span,
        ))
    }
}
