//! Message templates (minijinja). Compiled and checked once at load: syntax, and every path a
//! template reads is checked against the context schema like a condition's. Rendering is
//! strict: a template that reads a missing value fails, and the rule's effects are discarded.
//!
//! A template sees `context` (with `state`), `event`, `tool` and `result`, and has the filter
//! `percent` (`0.85 | percent` is `85%`) on top of minijinja's built-ins.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value};
use serde_json::Value as Json;
use warden_expr::{CompileOptions, Compiler, ExprError};

/// Most template instructions one render may take (stops runaway loops). minijinja counts into
/// the same budget every 64 bytes of text a template builds or writes as one more step, so a
/// template that builds a huge string is stopped by it too.
const FUEL: u64 = 100_000;

/// The most one render may write, in bytes: a notification or a value that large is a mistake,
/// and it is said to be one (the fuel's share of bytes would stop it later, and say "steps").
const MAX_OUTPUT: usize = 1 << 20;

/// Most tokens one `{{ }}` or `{% %}` tag may hold, and the deepest a template may nest (open
/// `{% %}` blocks, one more per `elif`, plus the brackets open in a tag). Checked by [`limits`]
/// before minijinja sees the source, because minijinja's parser, compiler and AST walks recurse
/// once per level, and a chain (`x|e|e...`, `a.b.c...`, `1+1+...`, `not not ...`, `a ~ b ~ ...`,
/// `a if b else c if ...`) is as deep as it is long; its own guard (150 levels) counts only
/// brackets and blocks, and is too loose for a 2 MiB stack anyway. Templates are compiled on the
/// hot-reload watcher thread (2 MiB), so the bounds must hold there in a debug build. Measured
/// with minijinja 3.1 unoptimized: a tag of 256 tokens needs at most ~0.3 MiB (a level costs at
/// most one token and ~1.2 KiB, or two and ~2.3 KiB), a level of nesting ~22 KiB (32: ~0.7
/// MiB), the worst mix within both bounds ~0.9 MiB, leaving over 1 MiB for the caller. Ordinary
/// templates use a few tokens per tag and nest two or three levels. (Rendering runs bytecode, not
/// the AST, so it stays shallow on the tokio workers.)
const MAX_TAG_TOKENS: usize = 256;
/// See [`MAX_TAG_TOKENS`].
const MAX_NESTING: usize = 32;

/// Names a template may use without them being context roots.
const TEMPLATE_GLOBALS: &[&str] = &[
    "range",
    "dict",
    "namespace",
    "loop",
    "self",
    "super",
    "varargs",
    "kwargs",
    "caller",
];

/// What templates render with.
pub trait Values {
    /// The values (`context`, `event`, ...); asked for at every render, so they may be cached.
    fn values(&mut self) -> Value;
    /// Asked after each render: true when the render read something the values did not have
    /// yet (plugin state not read yet in this tick), which they now have, so that the template
    /// must be rendered again. Must turn false after a few renders.
    fn again(&mut self) -> bool {
        false
    }
}

/// Values made by a function, with nothing to read again (tests).
impl<F: FnMut() -> Value> Values for F {
    fn values(&mut self) -> Value {
        self()
    }
}

/// A string that may be a template.
#[derive(Debug, Clone)]
pub enum Text {
    /// No template syntax: used as is (and shared, not copied).
    Static(Arc<str>),
    /// A compiled template, by name in the environment.
    Template(String),
}

/// A value whose strings may be templates (a set_state value, an event payload).
#[derive(Debug, Clone)]
pub enum ValueTemplate {
    /// Nothing to render.
    Literal(Json),
    /// A string rendered as a string.
    Text(Text),
    /// `"{{ expr }}"` alone: the expression's value, with its type.
    Typed(String),
    /// A list whose items are templates.
    Array(Vec<ValueTemplate>),
    /// A table whose values are templates.
    Object(Vec<(String, ValueTemplate)>),
}

/// Why a template did not compile.
pub enum TemplateError {
    /// Bad syntax; the message, and the 1-based line within the template.
    Syntax(String, Option<usize>),
    /// A path the schema does not have.
    Path(ExprError),
}

/// All the templates of a program, in one environment. Shared by the rules compiled on demand
/// (see `Program`, in `warden-program`), so it is added to through `&self`: a template's
/// source is kept under its name, and the environment's loader compiles it at its first lookup, which `text`
/// makes at once, to check it.
pub struct Templates {
    env: Environment<'static>,
    /// The source of template `t{n}` at `n`.
    sources: Arc<RwLock<Vec<Arc<str>>>>,
    /// Paths already checked, per compiler (kept alive here, so that its schema is told apart
    /// by address) and per set of roots unavailable (by name): the same paths recur in many
    /// templates.
    checked: Mutex<Vec<(Compiler, String, HashSet<String>)>>,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("count", &read(&self.sources).len())
            .finish()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn percent(v: f64, digits: Option<u32>) -> String {
    let digits = digits.unwrap_or(0).min(6) as usize;
    format!("{:.*}%", digits, v * 100.0)
}

impl Default for Templates {
    fn default() -> Self {
        Templates::new()
    }
}

impl Templates {
    /// The template environment with Warden's filters and functions.
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        // minijinja names a missing value (`result.count` is undefined) only in debug mode,
        // which it turns on by default in debug builds alone: on in every build, so a release
        // binary says what is missing as a test build does. It costs only when an error is made.
        env.set_debug(true);
        env.set_fuel(Some(FUEL));
        env.set_recursion_limit(64);
        env.add_filter("percent", percent);
        // `context.state.get('key', default)` as the conditions write it.
        env.set_unknown_method_callback(|_state, value, method, args| {
            if method == "get"
                && value.kind() == ValueKind::Map
                && !args.is_empty()
                && args.len() <= 2
            {
                let found = value.get_item(&args[0]).unwrap_or(Value::UNDEFINED);
                return Ok(if found.is_undefined() {
                    args.get(1).cloned().unwrap_or(Value::from(()))
                } else {
                    found
                });
            }
            Err(Error::from(ErrorKind::UnknownMethod))
        });
        let sources: Arc<RwLock<Vec<Arc<str>>>> = Arc::default();
        let lookup = sources.clone();
        env.set_loader(move |name| {
            // Only the names handed out (`t7`, not `t07` or `t+7`).
            let n = name
                .strip_prefix('t')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| name == format!("t{n}"));
            Ok(n.and_then(|n| read(&lookup).get(n).map(|s| s.to_string())))
        });
        Templates {
            env,
            sources,
            checked: Mutex::default(),
        }
    }

    /// Compiles `src`, checking the paths it reads with `compiler` under `opts`.
    pub fn text(
        &self,
        src: &str,
        compiler: &Compiler,
        opts: &CompileOptions<'_>,
    ) -> Result<Text, TemplateError> {
        if !src.contains("{{") && !src.contains("{%") && !src.contains("{#") {
            return Ok(Text::Static(Arc::from(src)));
        }
        limits(src)?;
        self.compile(src, compiler, opts)
    }

    /// Compiles `src`, whose [`limits`] were checked (or that wraps a checked template).
    fn compile(
        &self,
        src: &str,
        compiler: &Compiler,
        opts: &CompileOptions<'_>,
    ) -> Result<Text, TemplateError> {
        let name = {
            let mut sources = self.sources.write().unwrap_or_else(PoisonError::into_inner);
            sources.push(Arc::from(src));
            format!("t{}", sources.len() - 1)
        };
        let template = self
            .env
            .get_template(&name)
            .map_err(|e| TemplateError::Syntax(describe(&e), e.line()))?;
        let mut paths: Vec<String> = template.undeclared_variables(true).into_iter().collect();
        paths.sort();
        for path in paths {
            let root = path.split('.').next().unwrap_or_default();
            if TEMPLATE_GLOBALS.contains(&root) {
                continue;
            }
            if let Some(helper) = compiler
                .schema()
                .helpers()
                .iter()
                .find(|h| h.name() == root)
            {
                return Err(TemplateError::Syntax(
                    format!(
                        "`{root}` is a condition helper; templates read values directly (it stands for `{}`)",
                        helper.body()
                    ),
                    None,
                ));
            }
            self.check_path(&path, compiler, opts)?;
        }
        Ok(Text::Template(name))
    }

    /// Checks one path a template reads, once per compiler and hook (see `checked`).
    fn check_path(
        &self,
        path: &str,
        compiler: &Compiler,
        opts: &CompileOptions<'_>,
    ) -> Result<(), TemplateError> {
        let mut unavailable = String::new();
        for (root, _) in opts.unavailable {
            unavailable.push_str(root);
            unavailable.push(',');
        }
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        let at = checked
            .iter()
            .position(|(c, u, _)| std::ptr::eq(c.schema(), compiler.schema()) && *u == unavailable);
        if let Some(i) = at
            && checked[i].2.contains(path)
        {
            return Ok(());
        }
        compiler.check(path, opts).map_err(TemplateError::Path)?;
        let i = match at {
            Some(i) => i,
            None => {
                checked.push((compiler.clone(), unavailable, HashSet::new()));
                checked.len() - 1
            }
        };
        checked[i].2.insert(path.to_string());
        Ok(())
    }

    /// Compiles a value: strings become templates; `"{{ expr }}"` alone keeps the type.
    pub fn value(
        &self,
        v: &Json,
        compiler: &Compiler,
        opts: &CompileOptions<'_>,
    ) -> Result<ValueTemplate, TemplateError> {
        Ok(match v {
            Json::String(s) => {
                if let Some(expr) = lone_expression(s) {
                    // Checked as a template; rendered through `tojson` to keep the type (the
                    // wrapper adds a bracket and two tokens, well within the limits' margin).
                    self.text(s, compiler, opts)?;
                    match self.compile(&format!("{{{{ ({expr}) | tojson }}}}"), compiler, opts)? {
                        Text::Template(name) => ValueTemplate::Typed(name),
                        Text::Static(_) => ValueTemplate::Literal(v.clone()),
                    }
                } else {
                    match self.text(s, compiler, opts)? {
                        Text::Static(_) => ValueTemplate::Literal(v.clone()),
                        t => ValueTemplate::Text(t),
                    }
                }
            }
            Json::Array(items) => {
                let items = items
                    .iter()
                    .map(|i| self.value(i, compiler, opts))
                    .collect::<Result<Vec<_>, _>>()?;
                if items.iter().all(|i| matches!(i, ValueTemplate::Literal(_))) {
                    ValueTemplate::Literal(v.clone())
                } else {
                    ValueTemplate::Array(items)
                }
            }
            Json::Object(map) => {
                let fields = map
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.value(v, compiler, opts)?)))
                    .collect::<Result<Vec<_>, _>>()?;
                if fields
                    .iter()
                    .all(|(_, f)| matches!(f, ValueTemplate::Literal(_)))
                {
                    ValueTemplate::Literal(v.clone())
                } else {
                    ValueTemplate::Object(fields)
                }
            }
            other => ValueTemplate::Literal(other.clone()),
        })
    }

    /// Renders a text with `values` (asked for only when the text is a template).
    #[inline]
    pub fn render(&self, text: &Text, values: &mut dyn Values) -> Result<Arc<str>, String> {
        match text {
            Text::Static(s) => Ok(s.clone()),
            Text::Template(name) => self.render_named(name, values).map(Arc::from),
        }
    }

    fn render_named(&self, name: &str, values: &mut dyn Values) -> Result<String, String> {
        let template = self.env.get_template(name).map_err(|e| describe(&e))?;
        let too_large = || {
            format!(
                "the template wrote more than {} MiB, the most one render may write, and was stopped",
                MAX_OUTPUT >> 20
            )
        };
        loop {
            let rendered = template.render(values.values());
            if values.again() {
                continue;
            }
            return match rendered {
                Ok(text) if text.len() > MAX_OUTPUT => Err(too_large()),
                Ok(text) => Ok(text),
                // The fuel counts written bytes as steps: render again into an output that
                // stops at the size limit, to tell a render that wrote too much from one that
                // ran too long (only a failed render pays for this).
                Err(e) if e.kind() == ErrorKind::OutOfFuel => {
                    let mut out = Capped::default();
                    match template.render_captured_to(values.values(), &mut out) {
                        Err(_) if out.over => Err(too_large()),
                        _ => Err(describe(&e)),
                    }
                }
                Err(e) => Err(describe(&e)),
            };
        }
    }

    /// Renders a value template.
    pub fn render_value(&self, v: &ValueTemplate, values: &mut dyn Values) -> Result<Json, String> {
        Ok(match v {
            ValueTemplate::Literal(j) => j.clone(),
            ValueTemplate::Text(t) => Json::String(self.render(t, values)?.to_string()),
            ValueTemplate::Typed(name) => {
                let json = self.render_named(name, values)?;
                serde_json::from_str(&json)
                    .map_err(|e| format!("the value did not render to JSON: {e}"))?
            }
            ValueTemplate::Array(items) => Json::Array(
                items
                    .iter()
                    .map(|i| self.render_value(i, values))
                    .collect::<Result<_, _>>()?,
            ),
            ValueTemplate::Object(fields) => Json::Object(
                fields
                    .iter()
                    .map(|(k, f)| Ok((k.clone(), self.render_value(f, values)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }
}

/// A render's output, refusing to grow past [`MAX_OUTPUT`] (to tell which limit a failed
/// render hit).
#[derive(Default)]
struct Capped {
    text: Vec<u8>,
    over: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.text.len() + buf.len() > MAX_OUTPUT {
            self.over = true;
            return Err(std::io::Error::other("the render's output limit"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Checks `src` as a rule's template is checked when its file is loaded (the size and nesting
/// limits first, then minijinja's syntax, then every path it reads against the context schema)
/// and, when it passes, renders it with `values` (an object: `context`, `event`, `tool`,
/// `result`...) under the limits a rule's template renders with. The rendered text, or what is
/// wrong (starting with `line N: ` when the problem has a line in the template). For tools that
/// check a template on its own, and the `template` fuzz target.
pub fn check_template(src: &str, values: &Json) -> Result<String, TemplateCheckError> {
    static COMPILER: std::sync::OnceLock<Compiler> = std::sync::OnceLock::new();
    let compiler = COMPILER.get_or_init(|| Compiler::new(crate::schema::schema().clone()));
    let templates = Templates::new();
    let text = templates
        .text(src, compiler, &CompileOptions::default())
        .map_err(|e| match e {
            TemplateError::Syntax(message, line) => TemplateCheckError { line, message },
            TemplateError::Path(e) => TemplateCheckError {
                line: None,
                message: e.to_string(),
            },
        })?;
    templates
        .render(&text, &mut || Value::from(minijinja::value::Serde(values)))
        .map(|s| s.to_string())
        .map_err(|message| TemplateCheckError {
            line: None,
            message,
        })
}

/// Why a template does not pass [`check_template`]: what is wrong, and its line in the
/// template when it has one (shown as `line N: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", .line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct TemplateCheckError {
    /// The line of the template, when the problem has one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Refuses a template that would nest too deeply for minijinja to compile on a small stack (see
/// [`MAX_TAG_TOKENS`]): a tag of more than [`MAX_TAG_TOKENS`] tokens, or nesting deeper than
/// [`MAX_NESTING`]. A cheap scan that follows minijinja's lexer (string literals are one token,
/// `{# #}` comments and `{% raw %}` blocks are skipped, a tag ends at its closer outside
/// brackets); a template it cannot follow (an unclosed tag within the limits) is left to
/// minijinja, which reports the syntax error.
fn limits(src: &str) -> Result<(), TemplateError> {
    let b = src.as_bytes();
    let line = |at: usize| Some(1 + b[..at].iter().filter(|&&c| c == b'\n').count());
    // Open blocks: the statement that opened each, and the levels it holds (one more per
    // `elif`). An `end...` closes only the block it names: a stray one cannot hide the levels
    // of an enclosing block.
    let mut blocks: Vec<(&str, usize)> = Vec::new();
    let depth = |blocks: &[(&str, usize)]| blocks.iter().map(|(_, levels)| levels).sum::<usize>();
    let mut i = 0;
    while let Some(off) = b[i..]
        .windows(2)
        .position(|w| w[0] == b'{' && matches!(w[1], b'{' | b'%' | b'#'))
    {
        let start = i + off;
        let kind = b[start + 1];
        let mut at = start + 2;
        if kind == b'#' {
            match find(b, at, b"#}") {
                Some(end) => {
                    i = end + 2;
                    continue;
                }
                None => return Ok(()),
            }
        }
        if matches!(b.get(at), Some(b'-' | b'+')) {
            at += 1;
        }
        let tag = scan_tag(b, at, if kind == b'{' { b'}' } else { b'%' });
        let what = if kind == b'{' {
            "this `{{ }}` expression"
        } else {
            "this `{% %}` tag"
        };
        if tag.tokens > MAX_TAG_TOKENS {
            return Err(TemplateError::Syntax(
                format!(
                    "{what} is too complex (more than {MAX_TAG_TOKENS} tokens); split it with `{{% set %}}`"
                ),
                line(start),
            ));
        }
        let inner = depth(&blocks) + tag.brackets;
        let word = tag.first.map(|r| &src[r]).unwrap_or_default();
        if kind == b'%' && tag.closed {
            match word {
                "if" | "for" | "with" | "macro" | "call" | "filter" | "block" | "autoescape" => {
                    blocks.push((word, 1))
                }
                "set" if !tag.assigns => blocks.push((word, 1)),
                "elif" => {
                    // minijinja nests each `elif` in the one before: count it wherever it is.
                    match blocks.last_mut() {
                        Some(("if", levels)) => *levels += 1,
                        _ => blocks.push(("elif", 1)),
                    }
                }
                "raw" if tag.tokens == 1 => match find_endraw(b, tag.end) {
                    Some(end) => {
                        i = end;
                        continue;
                    }
                    None => return Ok(()),
                },
                w if w.starts_with("end")
                    && blocks.last().is_some_and(|(kind, _)| w[3..] == **kind) =>
                {
                    blocks.pop();
                }
                _ => {}
            }
        }
        if inner.max(depth(&blocks)) > MAX_NESTING {
            return Err(TemplateError::Syntax(
                format!(
                    "the template nests too deeply (more than {MAX_NESTING} levels of `{{% %}}` blocks, `elif`s and brackets); flatten it, or split it with `{{% set %}}`"
                ),
                line(start),
            ));
        }
        if !tag.closed {
            return Ok(());
        }
        i = tag.end;
    }
    Ok(())
}

/// What [`limits`] learnt of one tag.
struct Tag {
    /// Just past the closer (the end of the source if there is none).
    end: usize,
    closed: bool,
    tokens: usize,
    /// The most brackets open at once.
    brackets: usize,
    /// The first token, if it is a word (the statement of a `{% %}` tag).
    first: Option<std::ops::Range<usize>>,
    /// Whether it has a lone `=` (`{% set x = 1 %}`, not the block `{% set x %}`).
    assigns: bool,
}

/// Scans the tag whose contents start at `at`, up to `close` `}` (`}}` or `%}`) outside brackets,
/// as minijinja's lexer does.
fn scan_tag(b: &[u8], mut at: usize, close: u8) -> Tag {
    let mut tag = Tag {
        end: b.len(),
        closed: false,
        tokens: 0,
        brackets: 0,
        first: None,
        assigns: false,
    };
    let mut balance: isize = 0;
    let word = |c: u8| c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80;
    while at < b.len() {
        let c = b[at];
        if c.is_ascii_whitespace() {
            at += 1;
            continue;
        }
        if balance == 0 {
            let ws = usize::from(matches!(c, b'-' | b'+'));
            if b[at + ws..].starts_with(&[close, b'}']) {
                tag.end = at + ws + 2;
                tag.closed = true;
                return tag;
            }
        }
        tag.tokens += 1;
        let from = at;
        at += 1;
        match c {
            b'\'' | b'"' => {
                while at < b.len() && b[at] != c {
                    at += if b[at] == b'\\' { 2 } else { 1 };
                }
                at = (at + 1).min(b.len());
            }
            b'(' | b'[' | b'{' => {
                balance += 1;
                // A closer too many before (`)(`) leaves the balance below zero: no depth.
                tag.brackets = tag.brackets.max(usize::try_from(balance).unwrap_or(0));
            }
            b')' | b']' | b'}' => balance -= 1,
            // Two-character operators: `//`, `**`, `==`, `!=`, `>=`, `<=`.
            b'/' | b'*' | b'=' | b'!' | b'>' | b'<'
                if matches!(
                    (c, b.get(at)),
                    (b'/', Some(b'/'))
                        | (b'*', Some(b'*'))
                        | (b'=' | b'!' | b'>' | b'<', Some(b'='))
                ) =>
            {
                at += 1;
            }
            // An assignment is a `=` outside brackets (`width=2` in a call is an argument).
            b'=' if balance == 0 => tag.assigns = true,
            b'0'..=b'9' => {
                while at < b.len() && word(b[at]) {
                    at += 1;
                }
                // As in minijinja, a number right after a dot (`x.1.0`, an index) has no fraction.
                if (from == 0 || b[from - 1] != b'.')
                    && b.get(at) == Some(&b'.')
                    && b.get(at + 1).is_some_and(u8::is_ascii_digit)
                {
                    at += 1;
                    while at < b.len() && word(b[at]) {
                        at += 1;
                    }
                }
            }
            c if word(c) => {
                while at < b.len() && word(b[at]) {
                    at += 1;
                }
                if tag.tokens == 1 {
                    tag.first = Some(from..at);
                }
            }
            _ => {}
        }
    }
    tag
}

/// Where `needle` starts in `b` at or after `from`.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// Just past the `{% endraw %}` at or after `from` (minijinja's raw blocks ignore what is in them).
fn find_endraw(b: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let mut at = find(b, from, b"{%")? + 2;
        from = at;
        if matches!(b.get(at), Some(b'-' | b'+')) {
            at += 1;
        }
        while b.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        if !b[at..].starts_with(b"endraw") {
            continue;
        }
        at += "endraw".len();
        while b.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        if matches!(b.get(at), Some(b'-' | b'+')) {
            at += 1;
        }
        if b[at..].starts_with(b"%}") {
            return Some(at + 2);
        }
    }
}

/// The expression of a string that is exactly one `{{ expr }}`.
fn lone_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.trim_start_matches('-').trim_end_matches('-');
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%"))
        .then_some(inner.trim())
}

/// An author-facing description of a template error (minijinja's own names the internal
/// template, which means nothing to the author).
fn describe(e: &Error) -> String {
    if e.kind() == ErrorKind::UndefinedError
        && let Some(name) = e.detail().and_then(|d| d.strip_suffix(" is undefined"))
    {
        return format!("the template reads {name}, which is missing");
    }
    let what = match e.kind() {
        ErrorKind::UndefinedError => "the template reads a value that is not there".to_string(),
        ErrorKind::OutOfFuel => format!(
            "the template used up its {FUEL} steps and was stopped (every instruction is a step, and so are every 64 bytes of text it builds: a loop too long or a text too large)"
        ),
        ErrorKind::SyntaxError => "template syntax error".to_string(),
        ErrorKind::UnknownMethod => "unknown method".to_string(),
        ErrorKind::UnknownFilter => "unknown filter".to_string(),
        other => format!("{other}"),
    };
    match e.detail() {
        Some(d) => format!("{what}: {d}"),
        None => what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::schema;

    fn compile(t: &Templates, src: &str) -> Result<Text, String> {
        let c = Compiler::new(schema().clone());
        t.text(src, &c, &CompileOptions::default())
            .map_err(|e| match e {
                TemplateError::Syntax(m, line) => format!("syntax: {m} (line {line:?})"),
                TemplateError::Path(e) => format!("path: {e}"),
            })
    }

    /// Templates are found by the names they were given, spelled as given: `t1`, not `t01`.
    #[test]
    fn a_template_is_found_by_its_own_name_only() {
        let t = Templates::new();
        compile(&t, "first {{ context.turn.number }}").unwrap();
        compile(&t, "second {{ context.turn.number }}").unwrap();
        let values = || minijinja::context! { context => minijinja::context! { turn => minijinja::context! { number => 3 } } };
        for (name, found) in [("t1", true), ("t01", false), ("t+1", false), ("t99", false)] {
            let text = compile(&t, &format!("{{% include '{name}' %}}")).unwrap();
            let rendered = t.render(&text, &mut { values });
            assert_eq!(rendered.is_ok(), found, "{name}: {rendered:?}");
        }
    }

    #[test]
    fn static_text_is_not_a_template() {
        let t = Templates::new();
        assert!(matches!(compile(&t, "plain").unwrap(), Text::Static(_)));
    }

    #[test]
    fn the_seed_template_renders() {
        let t = Templates::new();
        let text = compile(&t, "Token budget at {{ (context.turn.token_usage * 100) | int }}% ({{ context.turn.token_usage | percent }})").unwrap();
        let mut values = || minijinja::context! { context => minijinja::context! { turn => minijinja::context! { token_usage => 0.85 } } };
        assert_eq!(
            &*t.render(&text, &mut values).unwrap(),
            "Token budget at 85% (85%)"
        );
    }

    #[test]
    fn paths_are_checked_at_load() {
        let t = Templates::new();
        let err = compile(&t, "{{ context.turn.tokn_usage }}").unwrap_err();
        assert!(
            err.contains("did you mean `context.turn.token_usage`"),
            "{err}"
        );
        let err = compile(&t, "{{ contxt.turn }}").unwrap_err();
        assert!(err.contains("did you mean `context`"), "{err}");
        let err = compile(&t, "{{ unclosed ").unwrap_err();
        assert!(err.starts_with("syntax"), "{err}");
        compile(
            &t,
            "{% for x in range(3) %}{{ x }}{% endfor %}{{ result.anything }}",
        )
        .unwrap();
        let err = compile(&t, "{{ failure_count('x') }}").unwrap_err();
        assert!(
            err.contains("condition helper") && err.contains("context.history.failures"),
            "{err}"
        );
    }

    #[test]
    fn strict_rendering_and_state_get() {
        let t = Templates::new();
        let text = compile(&t, "{{ result.count }}").unwrap();
        let err = t
            .render(
                &text,
                &mut || minijinja::context! { result => minijinja::context! {} },
            )
            .unwrap_err();
        assert_eq!(err, "the template reads `result.count`, which is missing");
        let text = compile(
            &t,
            "{{ context.state.get('n', 0) + 1 }}/{{ context.state.get('m') }}",
        )
        .unwrap();
        let out = t
            .render(&text, &mut || minijinja::context! { context => minijinja::context! { state => minijinja::context! { m => "x" } } })
            .unwrap();
        assert_eq!(&*out, "1/x");
    }

    #[test]
    fn a_lone_expression_keeps_its_type() {
        let c = Compiler::new(schema().clone());
        let t = Templates::new();
        let v = t
            .value(&serde_json::json!({"n": "{{ context.turn.number + 1 }}", "s": "turn {{ context.turn.number }}", "k": 3}), &c, &CompileOptions::default())
            .ok()
            .unwrap();
        let out = t
            .render_value(&v, &mut || minijinja::context! { context => minijinja::context! { turn => minijinja::context! { number => 4 } } })
            .unwrap();
        assert_eq!(out, serde_json::json!({"n": 5, "s": "turn 4", "k": 3}));
    }

    #[test]
    fn limits_count_tokens_per_tag_and_nesting() {
        let err = |src: &str| match limits(src) {
            Err(TemplateError::Syntax(m, line)) => Some((m, line)),
            _ => None,
        };
        // A tag of exactly 256 tokens passes; one more is refused.
        let at = |n: usize| format!("{{{{ x{} }}}}", " ~ x".repeat(n));
        assert!(err(&format!("{{{{ -x{} }}}}", " ~ x".repeat(127))).is_none());
        assert!(err(&format!("{{{{ - -x{} }}}}", " ~ x".repeat(127))).is_some());
        let (m, line) = err(&format!("a\n\n{}", at(128))).unwrap();
        assert!(m.contains("more than 256 tokens"), "{m}");
        assert_eq!(line, Some(3));
        // Two-character operators are one token; a number does not swallow a chain of dots.
        assert!(err(&format!("{{{{ 1{} }}}}", " == 1".repeat(127))).is_none());
        assert!(err(&format!("{{{{ x{} }}}}", ".0".repeat(200))).is_some());
        // Whitespace control, `}}` closing a map, and strings with closers in them.
        assert!(
            err("{{- {'a': {'b': '}}'}}['a'] -}}{%+ if x +%}{{ \"%}\" }}{%- endif -%}").is_none()
        );
        // Nesting: 32 levels pass, 33 do not; `elif`s count until their `endif`.
        let ifs = |n: usize| format!("{}x{}", "{% if x %}".repeat(n), "{% endif %}".repeat(n));
        assert!(err(&ifs(32)).is_none());
        assert!(err(&ifs(33)).unwrap().0.contains("nests too deeply"));
        let elifs = |n: usize| format!("{{% if x %}}{}{{% endif %}}", "{% elif x %}".repeat(n));
        assert!(err(&elifs(31).repeat(10)).is_none());
        assert!(err(&elifs(32)).is_some());
        assert!(
            err(&format!(
                "{{% if x %}}{{{{ {}1{} }}}}{{% endif %}}",
                "(".repeat(31),
                ")".repeat(31)
            ))
            .is_none()
        );
        assert!(
            err(&format!(
                "{{% if x %}}{{{{ {}1{} }}}}{{% endif %}}",
                "(".repeat(32),
                ")".repeat(32)
            ))
            .is_some()
        );
        // `{% set x %}` opens a block, `{% set x = 1 %}` does not.
        assert!(err(&"{% set x = 1 %}".repeat(100)).is_none());
        assert!(err(&"{% set x %}".repeat(33)).is_some());
        // A `=` inside a call is an argument, not an assignment: a block `set` with a filter
        // that takes one still opens a block, and its `endset` closes only it. (Once, it closed
        // the enclosing `if` instead, and the `elif`s after it went uncounted.)
        let hidden = format!(
            "{{% if 1 %}}{{% set y | indent(width=2) %}}{{% endset %}}{}{{% endif %}}",
            "{% elif 1 %}".repeat(40)
        );
        assert!(err(&hidden).is_some());
        let stray = format!(
            "{{% if 1 %}}{{% endset %}}{{% endfor %}}{}{{% endif %}}",
            "{% elif 1 %}".repeat(40)
        );
        assert!(err(&stray).is_some());
        assert!(err("{% set y | indent(width=2) %}x{% endset %}{% set z = f(a=1) %}").is_none());
        // Comments and raw blocks are skipped; an unclosed tag is left to minijinja.
        let deep = format!("{{{{ 1{} }}}}", "|e".repeat(300));
        assert!(err(&format!("{{# {deep} #}}{{%- raw -%}}{deep}{{% endraw %}}")).is_none());
        assert!(err("{{ x").is_none());
        assert!(err(&format!("{{{{ x{}", "|e".repeat(300))).is_some());
    }

    #[test]
    fn runaway_templates_are_stopped() {
        let t = Templates::new();
        let text = compile(
            &t,
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        )
        .unwrap();
        let err = t.render(&text, &mut || minijinja::context! {}).unwrap_err();
        assert!(err.contains("stopped") || err.contains("range"), "{err}");
    }

    #[test]
    fn a_closing_bracket_too_many_is_minijinjas_syntax_error_not_a_nesting_limit() {
        // Found by the `template` fuzz target: the bracket balance went below zero and was read
        // as a depth of 2^64 (an overflow in a debug build, "nests too deeply" in release).
        assert!(
            limits("{{ x)) ( }}").is_ok(),
            "the limits passed it to minijinja"
        );
        let t = Templates::new();
        let e = compile(&t, "{{ x)) ( }}").unwrap_err();
        assert!(
            !e.contains("nests too deeply") && e.contains("syntax"),
            "{e}"
        );
    }

    #[test]
    fn the_limit_a_render_hits_is_the_one_it_names() {
        let t = Templates::new();
        let render = |src: &str| {
            let text = compile(&t, src).unwrap();
            t.render(&text, &mut || minijinja::context! {}).unwrap_err()
        };
        // Too much written: the size, not the steps (it took a handful).
        assert_eq!(
            render("{{ 'x' * 2000000 }}"),
            "the template wrote more than 1 MiB, the most one render may write, and was stopped"
        );
        assert!(
            render("{% for i in range(3000) %}{{ 'abcdefgh' * 64 }}{% endfor %}")
                .contains("wrote more than 1 MiB")
        );
        // A loop too long, and a text too large to build: the shared budget, which says both.
        for src in [
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "{% set s = 'x' * 100000000 %}",
        ] {
            let e = render(src);
            assert!(
                e.starts_with("the template used up its 100000 steps and was stopped")
                    && e.contains("a loop too long or a text too large"),
                "{src}: {e}"
            );
        }
    }
}
