//! Warden's condition language.
//!
//! A condition is a one-line expression an operator writes in a rule file, such as
//! `context.turn.token_usage > 0.8 and failure_count('web_search') >= 3`. This crate parses it
//! (with `and`/`or`/`not` as words and `'single quoted'` strings, as the specification writes
//! them), checks every field path and function against a [`Schema`] the embedder declares, and
//! compiles it once: to a small native tree when it reads only typed scalar facts, otherwise to
//! a [rhai](https://rhai.rs) script run with an operation limit. Evaluation returns a
//! [`Verdict`] that keeps "false" apart from "could not evaluate".
//!
//! The crate knows nothing of rules, hooks or trees: it sees a schema and a [`Facts`] source.
//!
//! ```
//! use warden_expr::{Compiler, CompileOptions, Facts, FieldDef, Frame, Scalar, ScalarId, MapId, Schema, Type, Verdict};
//!
//! const TOKEN_USAGE: ScalarId = ScalarId(0);
//!
//! let mut schema = Schema::new();
//! let turn = schema.record("turn", vec![
//!     FieldDef::new("token_usage", Type::Float, "share of the token budget used").scalar(TOKEN_USAGE),
//! ]);
//! let context = schema.record("context", vec![FieldDef::new("turn", Type::Record(turn), "this turn")]);
//! schema.root("context", Type::Record(context), "what the agent is doing");
//! schema.helper("context_above_threshold", &["t"], "context.turn.token_usage >= t", "token usage at or above t");
//!
//! let compiler = Compiler::new(schema);
//! let cond = compiler.compile("context_above_threshold(0.8)", &CompileOptions::default()).unwrap();
//! assert!(cond.is_native());
//!
//! struct Now(f64);
//! impl Facts for Now {
//!     fn scalar(&self, _id: ScalarId) -> Scalar<'_> { Scalar::Float(self.0) }
//!     fn map_get(&self, _id: MapId, _key: &str) -> Option<Scalar<'_>> { None }
//!     fn root(&self, _name: &str) -> rhai::Dynamic { rhai::Dynamic::UNIT }
//! }
//! assert_eq!(cond.eval(&mut Frame::new(&Now(0.85))), Verdict::True);
//! assert_eq!(cond.eval(&mut Frame::new(&Now(0.5))), Verdict::False);
//!
//! let err = compiler.compile("context.turn.tokn_usage > 0.8", &CompileOptions::default()).unwrap_err();
//! assert_eq!(err.help(), Some("did you mean `context.turn.token_usage`?"));
//! ```

#![warn(missing_docs)]

mod check;
mod emit;
mod error;
mod lexer;
mod native;
mod parser;
mod reads;
mod regex;
mod runtime;
mod schema;

use std::sync::{Arc, OnceLock};

pub use error::{ErrorKind, ExprError, Span};
pub use rhai;
pub use runtime::MAX_OPERATIONS;
pub use schema::{FieldDef, MacroDef, MapId, RecordDef, RecordId, RootDef, ScalarId, Schema, Type};

use check::{Checker, Ir};
use native::Native;

/// How a [`Threshold`] compares the fact with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `fact < bound`
    Lt,
    /// `fact <= bound`
    Le,
    /// `fact > bound`
    Gt,
    /// `fact >= bound`
    Ge,
    /// `fact == bound`
    Eq,
}

/// A bound of a [`Threshold`]: integers stay integers, so large values compare exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// For an integer fact.
    Int(i64),
    /// For a float fact.
    Float(f64),
}

/// `fact <comparison> bound`: a condition part that [`Condition::necessary_threshold`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The scalar fact compared.
    pub fact: ScalarId,
    /// How.
    pub comparison: Comparison,
    /// With what.
    pub bound: Bound,
}

impl Threshold {
    /// Whether the threshold holds for `value`, exactly as the condition would compare them
    /// (a value of another kind never satisfies it).
    pub fn holds(&self, value: Scalar<'_>) -> bool {
        let bound = match self.bound {
            Bound::Int(k) => Scalar::Int(k),
            Bound::Float(k) => Scalar::Float(k),
        };
        let op = match self.comparison {
            Comparison::Lt => parser::BinOp::Lt,
            Comparison::Le => parser::BinOp::Le,
            Comparison::Gt => parser::BinOp::Gt,
            Comparison::Ge => parser::BinOp::Ge,
            Comparison::Eq => parser::BinOp::Eq,
        };
        native::compare(op, &value, &bound)
    }
}

/// A scalar value read directly from the embedder's facts (the fast path).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    /// No value.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(&'a str),
}

/// What [`Facts::data`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Data<'a> {
    /// A scalar.
    Scalar(Scalar<'a>),
    /// The last key is not in its map (every earlier one was).
    Missing,
    /// Anything else: a list or a map, a key of something that is not a map, or data the
    /// embedder does not read this way. The condition is then evaluated by the script engine.
    Other,
}

/// Where a condition's data comes from. The embedder implements it over its own state.
pub trait Facts {
    /// The value of a scalar field declared with [`FieldDef::scalar`].
    fn scalar(&self, id: ScalarId) -> Scalar<'_>;
    /// An entry of a map declared with [`FieldDef::direct_map`]; `None` if the key is absent.
    fn map_get(&self, id: MapId, key: &str) -> Option<Scalar<'_>>;
    /// The whole value of a root, as a script value (the default [`Facts::value`] reads it).
    fn root(&self, name: &str) -> rhai::Dynamic;

    /// The value at `path` (a root's name, then names of fields the schema declares below
    /// it, such as `["context", "history", "tools"]`), as a script value, for a condition that
    /// needs the script engine. With `keys`, the condition reads only those keys of it: a map
    /// may be given with just those of them it has (any other value must be given whole).
    ///
    /// A frame asks only for what its conditions read; the default reads the whole root and
    /// walks down to the value.
    fn value(&self, path: &[&str], keys: Option<&[&str]>) -> rhai::Dynamic {
        let _ = keys;
        let Some((root, fields)) = path.split_first() else {
            return rhai::Dynamic::UNIT;
        };
        let mut v = self.root(root);
        for f in fields {
            let next = v
                .read_lock::<rhai::Map>()
                .and_then(|m| m.get(*f).cloned())
                .unwrap_or(rhai::Dynamic::UNIT);
            v = next;
        }
        v
    }

    /// For the fast path: the scalar at `keys` (keys of maps, in turn) within the free-form
    /// value at `path` (as in [`Facts::value`]), such as `result.count`. The default gives
    /// [`Data::Other`]: such conditions then always use the script engine.
    fn data(&self, path: &[&str], keys: &[&str]) -> Data<'_> {
        let _ = (path, keys);
        Data::Other
    }
}

/// The result of evaluating a condition.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The condition could not say: data it reads is missing or of the wrong kind
    /// (`result.count` when the result has no `count`). The rule does not fire; the reason
    /// says what was missing.
    Undetermined(String),
    /// The condition is broken or ran away (division by zero, overflow, operation limit).
    Error(String),
}

/// One evaluation context: the facts of a moment, plus the script values built from them so
/// far. Reuse one frame for every condition evaluated against the same facts: a condition that
/// reads what the one before read (the same fields of a root) reuses its values.
pub struct Frame<'a> {
    facts: &'a dyn Facts,
    scope: rhai::Scope<'static>,
    /// Each root in the scope, with what of it was built (see `reads::RootRead::id`).
    built: Vec<(String, String)>,
}

impl<'a> Frame<'a> {
    /// A frame over `facts`.
    pub fn new(facts: &'a dyn Facts) -> Self {
        Frame {
            facts,
            scope: rhai::Scope::new(),
            built: Vec::new(),
        }
    }

    /// Forgets the script value of `root`, so the next condition that needs it asks the facts
    /// again (for a root whose value depends on who asks, such as per-plugin state).
    #[inline]
    pub fn invalidate(&mut self, root: &str) {
        // Most often nothing is built yet (a plugin chosen at a step's first rule).
        if !self.built.is_empty() {
            self.built.retain(|(r, _)| r != root);
        }
    }

    /// The facts this frame reads.
    pub fn facts(&self) -> &'a dyn Facts {
        self.facts
    }

    fn ensure(&mut self, reads: &[reads::RootRead]) {
        for r in reads {
            match self.built.iter_mut().find(|(root, _)| *root == r.root) {
                Some((_, id)) if *id == r.id => continue,
                Some((_, id)) => id.clone_from(&r.id),
                None => self.built.push((r.root.clone(), r.id.clone())),
            }
            let mut path = vec![r.root.as_str()];
            let value = reads::build(self.facts, &mut path, &r.read);
            self.scope.set_or_push(r.root.as_str(), value);
        }
    }
}

/// Options for one compilation.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompileOptions<'a> {
    /// Roots that exist in the schema but are not available where this expression is used,
    /// each with the reason shown to the author (`("result", "on_turn_start has no tool result")`).
    pub unavailable: &'a [(&'a str, &'a str)],
    /// Always use the script engine, even where the fast path applies (for testing that both
    /// agree, and for measuring).
    pub force_script: bool,
}

/// The script engine the conditions of a program share, built when a condition first needs it:
/// building it is most of the cost of a compiler, and a program whose conditions all take the
/// fast path never does (a hook process loads the rules at every event).
type SharedEngine = Arc<OnceLock<rhai::Engine>>;

fn engine(shared: &SharedEngine) -> &rhai::Engine {
    shared.get_or_init(runtime::engine)
}

/// Compiles conditions against one schema. Cheap to clone; shares its engine.
#[derive(Clone)]
pub struct Compiler {
    schema: Arc<Schema>,
    engine: SharedEngine,
}

impl Compiler {
    /// A compiler for `schema`.
    pub fn new(schema: Schema) -> Self {
        Compiler {
            schema: Arc::new(schema),
            engine: SharedEngine::default(),
        }
    }

    /// A compiler for another schema that shares this one's script engine (the engine is the
    /// costly part; schemas that differ in one root, such as each plugin's `settings`, can
    /// share it).
    pub fn with_schema(&self, schema: Schema) -> Self {
        Compiler {
            schema: Arc::new(schema),
            engine: self.engine.clone(),
        }
    }

    /// The schema conditions are checked against.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Checks `src` and returns its static type, without compiling it (templates use this to
    /// check the paths they read).
    pub fn check(&self, src: &str, opts: &CompileOptions<'_>) -> Result<Type, ExprError> {
        let parsed = parser::parse(src)?;
        Ok(Checker::new(&self.schema, src, opts.unavailable)
            .check(&parsed)?
            .ty)
    }

    /// Parses, checks and compiles a condition. The expression must be true or false.
    pub fn compile(&self, src: &str, opts: &CompileOptions<'_>) -> Result<Condition, ExprError> {
        let parsed = parser::parse(src)?;
        let ir = Checker::new(&self.schema, src, opts.unavailable).check(&parsed)?;
        match ir.ty.strip_null() {
            Type::Bool | Type::Any => {}
            other => {
                return Err(ExprError::new(
                    ErrorKind::Type,
                    Span::new(0, src.len()),
                    format!(
                        "a condition must be true or false, but this is {}",
                        other.name(&self.schema)
                    ),
                    check::bool_hint(other),
                ));
            }
        }
        let native = if opts.force_script || ir.ty != Type::Bool {
            None
        } else {
            native::compile(&ir)
        };
        let program = match native {
            Some(n) if !n.reads_data() => Program::Native(n),
            // Free-form data takes the fast path when it is what the fast path mirrors, and
            // the script engine otherwise (which then says what was wrong with it).
            Some(n) => Program::Hybrid(n, self.script(&ir, src)?),
            None => Program::Script(self.script(&ir, src)?),
        };
        Ok(Condition {
            source: src.to_string(),
            program,
            engine: self.engine.clone(),
        })
    }
}

impl Compiler {
    fn script(&self, ir: &Ir, src: &str) -> Result<Script, ExprError> {
        let text = emit::emit(ir);
        let text = if ir.ty == Type::Bool {
            text
        } else {
            format!("w_bool({text}, {})", emit::string_literal(src))
        };
        let reads = reads::collect(ir);
        let roots = reads.iter().map(|r| r.root.clone()).collect();
        let script = Script {
            ast: OnceLock::new(),
            text,
            reads,
            roots,
        };
        // The text is Warden's own, within the parser's limits (far below the engine's), so it
        // compiles: it is compiled when first run, which a condition on the fast path may never
        // be (and a program may then never build the engine). Test builds compile it now, so
        // that a fault in the emitted text shows where it is made.
        #[cfg(debug_assertions)]
        if let Err(e) = script.ast(&self.engine) {
            return Err(ExprError::new(
                ErrorKind::Limit,
                Span::new(0, src.len()),
                e.clone(),
                None,
            ));
        }
        Ok(script)
    }
}

/// A condition as the script engine runs it.
struct Script {
    /// `text` compiled, on first use.
    ast: OnceLock<Result<rhai::AST, String>>,
    text: String,
    /// What it reads of each root.
    reads: Vec<reads::RootRead>,
    roots: Vec<String>,
}

impl Script {
    fn ast(&self, shared: &SharedEngine) -> &Result<rhai::AST, String> {
        self.ast.get_or_init(|| {
            engine(shared).compile(&self.text).map_err(|e| {
                format!("the condition could not be compiled ({e}); this is a bug in Warden, please report it")
            })
        })
    }
}

enum Program {
    Native(Native),
    /// The fast path, which hands over to the script when free-form data is not what it
    /// mirrors.
    Hybrid(Native, Script),
    Script(Script),
}

impl Program {
    fn script(&self) -> Option<&Script> {
        match self {
            Program::Native(_) => None,
            Program::Hybrid(_, s) | Program::Script(s) => Some(s),
        }
    }
}

/// A compiled condition. Immutable, shareable between threads, evaluated many times.
pub struct Condition {
    source: String,
    program: Program,
    engine: SharedEngine,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition")
            .field("source", &self.source)
            .field("native", &self.is_native())
            .finish()
    }
}

impl Condition {
    /// The expression as the author wrote it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether it runs on the fast path (no script engine).
    pub fn is_native(&self) -> bool {
        matches!(self.program, Program::Native(_))
    }

    /// The rhai text it compiled to, when it may run in the script engine.
    pub fn script_text(&self) -> Option<&str> {
        self.program.script().map(|s| s.text.as_str())
    }

    /// The roots it reads through the script engine (empty on the fast path).
    pub fn roots(&self) -> &[String] {
        self.program.script().map_or(&[], |s| &s.roots)
    }

    /// A threshold on one scalar fact that must hold for the condition to be true, if the
    /// condition has one (`context.turn.token_usage > 0.8`, or the first such part of an
    /// `and` chain). An embedder can index rules by it and skip those that cannot fire.
    pub fn necessary_threshold(&self) -> Option<Threshold> {
        match &self.program {
            Program::Native(n) | Program::Hybrid(n, _) => n.necessary_threshold(),
            Program::Script(_) => None,
        }
    }

    /// The threshold this condition is, when it is that and nothing else
    /// (`context.turn.token_usage > 0.8`): then it is true exactly when
    /// [`Threshold::holds`] for the fact's value, and an embedder that found the threshold
    /// holding need not evaluate it.
    pub fn exact_threshold(&self) -> Option<Threshold> {
        match &self.program {
            Program::Native(n @ (Native::FloatThreshold(..) | Native::IntThreshold(..))) => {
                n.necessary_threshold()
            }
            _ => None,
        }
    }

    /// Evaluates the condition against `frame`. Never panics; every failure is a verdict.
    pub fn eval(&self, frame: &mut Frame<'_>) -> Verdict {
        let script = match &self.program {
            Program::Native(n) | Program::Hybrid(n, _) => match n.test(frame.facts) {
                Ok(true) => return Verdict::True,
                Ok(false) => return Verdict::False,
                Err(native::Fail::Error(e)) => return Verdict::Error(e),
                Err(native::Fail::Script) => match &self.program {
                    Program::Hybrid(_, s) => s,
                    _ => {
                        return Verdict::Error(
                            "internal: the fast path needs the script engine".into(),
                        );
                    }
                },
            },
            Program::Script(s) => s,
        };
        frame.ensure(&script.reads);
        let ast = match script.ast(&self.engine) {
            Ok(ast) => ast,
            Err(e) => return Verdict::Error(e.clone()),
        };
        match engine(&self.engine).eval_ast_with_scope::<rhai::Dynamic>(&mut frame.scope, ast) {
            Ok(v) => match v.as_bool() {
                Ok(true) => Verdict::True,
                Ok(false) => Verdict::False,
                Err(_) => Verdict::Undetermined(format!(
                    "`{}` produced {}, not true or false",
                    self.source,
                    runtime::kind_of(&v)
                )),
            },
            Err(e) => runtime::classify(&e),
        }
    }
}

/// The functions of the language, with a one-line description each (for documentation).
pub fn builtin_functions() -> impl Iterator<Item = (&'static str, &'static str)> {
    check::BUILTINS.iter().copied()
}

#[cfg(test)]
mod tests;
