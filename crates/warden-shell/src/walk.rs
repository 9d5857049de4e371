//! The walk of a command's syntax tree: every list, pipeline, group, subshell, loop, branch and
//! function body, with the working folder `cd` moves and the variables assigned along the way;
//! redirections (the files they write, the input they give); command and process substitutions
//! (which run); each simple command handed to `effects.rs`, with what reaches its standard
//! input. Code found inside a command (`sh -c`, `eval`...) is walked again, to a bounded depth
//! and within a bounded number of bytes.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect, Pipeline, SimpleCommand,
};

use crate::collect::{Collector, Input, Op, Recurse, Run};
use crate::effects;
use crate::model::{FindingKind, OpaqueKind};
use crate::paths::{Resolved, Resolver};
use crate::syntax;
use crate::words::{self, Expanded, Vars};

/// How many times code inside code is read (`sh -c "eval '...'"`).
const MAX_DEPTH: u32 = 6;

/// How many bytes of code an analysis reads in all, code inside code included.
const MAX_CODE: usize = 4 * crate::MAX_COMMAND;

/// The most words a `for` loop is run once per word for.
const MAX_LOOP: usize = 16;

/// Analyzes `command` into `out`.
pub(crate) fn analyze(command: &str, paths: &Resolver, out: &mut Collector) {
    let mut w = Walker {
        paths,
        out,
        depth: 0,
        budget: MAX_CODE,
        functions: HashMap::new(),
        bombs: HashSet::new(),
        calling: Vec::new(),
        fetched: Vec::new(),
    };
    let mut state = State {
        cwd: paths.cwd().map(str::to_string),
        ..State::default()
    };
    w.program(command, &mut state);
}

/// What the shell knows at a point of the command.
#[derive(Debug, Clone, Default)]
struct State {
    /// The working folder, when known.
    cwd: Option<String>,
    /// The variables assigned literal values.
    vars: Vars,
    /// `pushd`'s stack.
    dirs: Vec<Option<String>>,
    /// The wrappers the code runs under (code inside `sudo sh -c`), and how it was reached.
    wrappers: Vec<String>,
    via: Option<String>,
}

impl State {
    /// Sets the positional parameters (`$1`..., `$@`, `$#`) to `args`: a function's, or
    /// `sh -c`'s. One known only at run time is unknown.
    fn set_args(&mut self, args: &[Expanded]) {
        let old: usize = self.vars.get("#").and_then(|n| n.parse().ok()).unwrap_or(0);
        for i in 1..=old {
            self.vars.remove(&i.to_string());
        }
        for (i, a) in args.iter().enumerate() {
            if a.literal {
                self.vars.insert((i + 1).to_string(), a.text.clone());
            }
        }
        self.vars.insert("#".into(), args.len().to_string());
        if args.iter().all(|a| a.literal) {
            let all: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
            self.vars.insert("@".into(), all.join(" "));
        } else {
            self.vars.remove("@");
        }
    }

    /// The positional parameters as separate words, for `"$@"`, when all are known.
    fn args(&self) -> Option<Vec<Expanded>> {
        let n: usize = self.vars.get("#")?.parse().ok()?;
        (1..=n)
            .map(|i| self.vars.get(&i.to_string()).map(Expanded::literal))
            .collect()
    }
}

struct Walker<'a> {
    paths: &'a Resolver,
    out: &'a mut Collector,
    depth: u32,
    budget: usize,
    functions: HashMap<String, Rc<CompoundCommand>>,
    /// Functions that start themselves in a pipeline or the background.
    bombs: HashSet<String>,
    /// The functions being walked (a function that calls itself is walked once).
    calling: Vec<String>,
    /// The files the command downloads into, as written (`curl -o "$f"`).
    fetched: Vec<String>,
}

impl Walker<'_> {
    /// Parses and walks `code`.
    /// Parses and walks `code`; what its last command prints.
    fn program(&mut self, code: &str, state: &mut State) -> Input {
        if code.len() > self.budget {
            self.out
                .unparsed(code, "there is more code inside it than Warden reads");
            return Input::Unknown;
        }
        self.budget -= code.len();
        match syntax::parse(code) {
            Ok(program) => {
                let mut printed = Input::Unknown;
                for list in &program.complete_commands {
                    printed = self.list(list, state);
                }
                printed
            }
            Err(why) => {
                self.out.unparsed(code, &why.describe());
                Input::Unknown
            }
        }
    }

    /// Walks a list; what its last pipeline prints.
    fn list(&mut self, list: &CompoundList, state: &mut State) -> Input {
        let mut printed = Input::Unknown;
        for item in &list.0 {
            printed = self.pipeline(&item.0.first, state);
            for next in &item.0.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => printed = self.pipeline(p, state),
                }
            }
        }
        printed
    }

    /// Walks a pipeline; what its last command prints.
    fn pipeline(&mut self, pipeline: &Pipeline, state: &mut State) -> Input {
        if let [only] = &pipeline.seq[..] {
            return self.command(only, state, Input::Terminal);
        }
        // Each stage runs in a subshell of its own, reading what the one before printed.
        let mut input = Input::Terminal;
        for command in &pipeline.seq {
            let mut stage = state.clone();
            input = self.command(command, &mut stage, input);
        }
        input
    }

    fn command(&mut self, command: &Command, state: &mut State, stdin: Input) -> Input {
        match command {
            Command::Simple(sc) => self.simple(sc, state, stdin),
            Command::Compound(cc, redirects) => {
                let mut stdin = stdin;
                if let Some(list) = redirects {
                    let text = command.to_string();
                    for r in &list.0 {
                        if let Some(input) = self.redirect(r, state, &text) {
                            stdin = input;
                        }
                    }
                }
                self.compound(cc, state, stdin)
            }
            Command::Function(def) => {
                let name = def.fname.value.clone();
                if calls_itself(&def.body.0, &name) {
                    self.bombs.insert(name.clone());
                }
                self.functions.insert(name, Rc::new(def.body.0.clone()));
                Input::Unknown
            }
            Command::ExtendedTest(test) => {
                self.substitutions_in(&test.to_string(), state);
                Input::Unknown
            }
        }
    }

    /// Walks a compound command; what it prints, when it is a group or a subshell whose last
    /// command's output Warden can tell.
    fn compound(&mut self, cc: &CompoundCommand, state: &mut State, stdin: Input) -> Input {
        match cc {
            CompoundCommand::BraceGroup(b) => self.list(&b.list, state),
            CompoundCommand::Subshell(s) => self.list(&s.list, &mut state.clone()),
            CompoundCommand::ForClause(f) => {
                self.for_loop(f, state);
                Input::Unknown
            }
            CompoundCommand::ArithmeticForClause(f) => {
                self.list(&f.body.list, state);
                Input::Unknown
            }
            CompoundCommand::CaseClause(c) => {
                self.expand(&c.value.value, state);
                for case in &c.cases {
                    if let Some(cmd) = &case.cmd {
                        self.list(cmd, &mut state.clone());
                    }
                }
                Input::Unknown
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition, state);
                self.list(&i.then, &mut state.clone());
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, state);
                    }
                    self.list(&e.body, &mut state.clone());
                }
                Input::Unknown
            }
            CompoundCommand::WhileClause(w) => {
                // `... | while read -r f; do ...; done`: over literal lines, the body runs once
                // per line, the variables set to it.
                match (read_names(&w.0), &stdin) {
                    (Some(names), Input::Literal(text)) => {
                        for line in text.lines().filter(|l| !l.trim().is_empty()).take(MAX_LOOP) {
                            let mut each = state.clone();
                            let mut fields = line.split_whitespace();
                            for (k, name) in names.iter().enumerate() {
                                let value = if k + 1 == names.len() {
                                    fields.by_ref().collect::<Vec<_>>().join(" ")
                                } else {
                                    fields.next().unwrap_or("").to_string()
                                };
                                each.vars.insert(name.clone(), value);
                            }
                            self.list(&w.1.list, &mut each);
                        }
                    }
                    (names, _) => {
                        for name in names.iter().flatten() {
                            state.vars.remove(name);
                        }
                        self.list(&w.0, state);
                        self.list(&w.1.list, state);
                    }
                }
                Input::Unknown
            }
            CompoundCommand::UntilClause(w) => {
                self.list(&w.0, state);
                self.list(&w.1.list, state);
                Input::Unknown
            }
            CompoundCommand::Arithmetic(a) => {
                self.substitutions_in(&a.to_string(), state);
                Input::Unknown
            }
        }
    }

    /// A `for` loop: over literal words, its body runs once per word, the variable set to it.
    fn for_loop(&mut self, f: &ast::ForClauseCommand, state: &mut State) {
        let values: Vec<Expanded> = f
            .values
            .iter()
            .flatten()
            .map(|v| self.expand(&v.value, state))
            .collect();
        let literal = f.values.is_some() && values.iter().all(|v| v.literal && !v.glob);
        if literal && values.len() <= MAX_LOOP {
            for v in values {
                let mut each = state.clone();
                each.vars.insert(f.variable_name.clone(), v.text);
                self.list(&f.body.list, &mut each);
            }
        } else {
            state.vars.remove(&f.variable_name);
            self.list(&f.body.list, state);
        }
    }

    /// A word expanded in `state`; the command substitutions in it run (and are walked), and
    /// one whose output Warden can tell (`$(echo rm)`, `$(echo ... | base64 -d)`) stands for
    /// that output.
    fn expand(&mut self, word: &str, state: &State) -> Expanded {
        let home = self.paths.home();
        let cwd = state.cwd.as_deref();
        let none = words::Printed::new();
        let e = words::expand(word, &state.vars, home, cwd, &none);
        if e.substitutions.is_empty() {
            return e;
        }
        let mut printed = words::Printed::new();
        for code in &e.substitutions {
            if let Input::Literal(out) = self.inner(code, state, "$(...)") {
                // A substitution drops the trailing new lines of what it prints.
                printed.insert(code.clone(), out.trim_end_matches('\n').to_string());
            }
        }
        if printed.is_empty() {
            return e;
        }
        words::expand(word, &state.vars, home, cwd, &printed)
    }

    /// Code run inside the command (a substitution, `sh -c`...): walked one level deeper; what
    /// it prints.
    fn inner(&mut self, code: &str, state: &State, via: &str) -> Input {
        if self.depth >= MAX_DEPTH {
            self.out
                .unparsed(code, "code inside code nests deeper than Warden reads");
            return Input::Unknown;
        }
        self.depth += 1;
        let mut inner = State {
            cwd: state.cwd.clone(),
            vars: state.vars.clone(),
            dirs: Vec::new(),
            wrappers: state.wrappers.clone(),
            via: Some(via.to_string()),
        };
        let printed = self.program(code, &mut inner);
        self.depth -= 1;
        printed
    }

    /// The substitutions in text the walk does not take apart (a `[[ ]]` test, arithmetic).
    fn substitutions_in(&mut self, text: &str, state: &State) {
        let Ok(tokens) = brush_parser::uncached_tokenize_str(text, &Default::default()) else {
            return;
        };
        for t in tokens {
            if let brush_parser::Token::Word(w, _) = t {
                self.expand(&w, state);
            }
        }
    }

    fn simple(&mut self, sc: &SimpleCommand, state: &mut State, stdin: Input) -> Input {
        let mut words: Vec<Expanded> = Vec::new();
        let mut assignments: Vec<(String, Expanded)> = Vec::new();
        let mut redirects: Vec<&IoRedirect> = Vec::new();
        let items = sc
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(Some)
            .chain(std::iter::once(None))
            .chain(sc.suffix.iter().flat_map(|s| s.0.iter()).map(Some));
        for item in items {
            match item {
                None => {
                    if let Some(w) = &sc.word_or_name {
                        let e = self.expand(&w.value, state);
                        words.push(e);
                    }
                }
                Some(CommandPrefixOrSuffixItem::Word(w)) => {
                    // `"$@"` is as many words as there are positional parameters.
                    if matches!(w.value.as_str(), "\"$@\"" | "$@" | "$*")
                        && let Some(args) = state.args()
                    {
                        words.extend(args);
                        continue;
                    }
                    let e = self.expand(&w.value, state);
                    words.push(e);
                }
                Some(CommandPrefixOrSuffixItem::AssignmentWord(a, w)) => {
                    if words.is_empty() {
                        if let (
                            ast::AssignmentName::VariableName(name),
                            ast::AssignmentValue::Scalar(v),
                        ) = (&a.name, &a.value)
                        {
                            let e = self.expand(&v.value, state);
                            assignments.push((name.clone(), e));
                        }
                    } else {
                        // After the program: an argument (`export X=1`, `env X=1`).
                        let e = self.expand(&w.value, state);
                        words.push(e);
                    }
                }
                Some(CommandPrefixOrSuffixItem::IoRedirect(r)) => redirects.push(r),
                Some(CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub)) => {
                    self.list(&sub.list, &mut state.clone());
                    words.push(Expanded {
                        text: format!("<({})", sub.list),
                        process: Some(sub.list.to_string()),
                        ..Expanded::default()
                    });
                }
            }
        }
        let mut stdin = stdin;
        // The command as written, for the findings of its redirections (made only if it has
        // some).
        let text = if redirects.is_empty() {
            String::new()
        } else {
            sc.to_string()
        };
        for r in redirects {
            if let Some(input) = self.redirect(r, state, &text) {
                stdin = input;
            }
        }
        if words.is_empty() {
            // Assignments alone last for the rest of the command.
            for (name, value) in assignments {
                if value.literal {
                    state.vars.insert(name, value.text);
                } else {
                    state.vars.remove(&name);
                }
            }
            return Input::Unknown;
        }
        let program = words[0].text.clone();
        if words[0].literal
            && let Some(out) = self.builtin(&program, &words, state)
        {
            return out;
        }
        let run = Run {
            cwd: state.cwd.clone(),
            wrappers: state.wrappers.clone(),
            via: state.via.clone(),
        };
        effects::run(self, words, &run, stdin)
    }

    /// The shell's own commands that change what it knows (`cd`, `export`...), and the
    /// functions the command defined; `None` for anything else.
    fn builtin(&mut self, program: &str, words: &[Expanded], state: &mut State) -> Option<Input> {
        let run = Run {
            cwd: state.cwd.clone(),
            wrappers: state.wrappers.clone(),
            via: state.via.clone(),
        };
        match program {
            "cd" | "pushd" => {
                let target = words
                    .iter()
                    .skip(1)
                    .find(|w| !w.text.starts_with('-') || w.text == "-");
                let previous = state.cwd.clone();
                state.cwd = match target {
                    None => self.paths.home().map(str::to_string),
                    Some(t) if t.literal && t.text != "-" => Some(
                        self.paths
                            .resolve(&t.text, state.cwd.as_deref(), false)
                            .path,
                    )
                    .filter(|p| p.starts_with('/')),
                    Some(_) => None,
                };
                if program == "pushd" {
                    state.dirs.push(previous);
                }
                self.out.command(program, &words[1..], &run);
                Some(Input::Unknown)
            }
            "popd" => {
                state.cwd = state.dirs.pop().flatten();
                self.out.command(program, &words[1..], &run);
                Some(Input::Unknown)
            }
            "export" | "declare" | "local" | "readonly" | "typeset" => {
                for w in &words[1..] {
                    if let Some((name, value)) = w.text.split_once('=') {
                        if w.literal && crate::wrappers::is_assignment(&w.text) {
                            state.vars.insert(name.to_string(), value.to_string());
                        } else {
                            state.vars.remove(name);
                        }
                    }
                }
                self.out.command(program, &words[1..], &run);
                Some(Input::Unknown)
            }
            name if self.functions.contains_key(name) => {
                let text = self.out.command(name, &words[1..], &run);
                if self.bombs.contains(name) {
                    self.out.finding(
                        FindingKind::ForkBomb,
                        &text,
                        "",
                        format!(
                            "`{name}` starts itself again and again (a fork bomb), which freezes the machine: do not run it"
                        ),
                    );
                }
                if !self.calling.iter().any(|c| c == name) {
                    let body = self.functions[name].clone();
                    self.calling.push(name.to_string());
                    let mut inside = state.clone();
                    inside.set_args(&words[1..]);
                    self.compound(&body, &mut inside, Input::Unknown);
                    self.calling.pop();
                }
                Some(Input::Unknown)
            }
            _ => None,
        }
    }

    /// A redirection: the file it writes, or what it gives the command to read.
    fn redirect(&mut self, r: &IoRedirect, state: &State, command: &str) -> Option<Input> {
        let run = Run {
            cwd: state.cwd.clone(),
            wrappers: state.wrappers.clone(),
            via: state.via.clone(),
        };
        match r {
            IoRedirect::File(_, kind, target) => match target {
                IoFileRedirectTarget::Filename(word) => {
                    let e = self.expand(&word.value, state);
                    let op = match kind {
                        IoFileRedirectKind::Write | IoFileRedirectKind::Clobber => Op::Overwrite,
                        IoFileRedirectKind::Append | IoFileRedirectKind::ReadAndWrite => Op::Write,
                        IoFileRedirectKind::Read => return Some(Input::File),
                        _ => return None,
                    };
                    self.out.path(self.paths, &e, &run, op, command);
                    None
                }
                IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list, &mut state.clone());
                    let code = sub.list.to_string();
                    (matches!(kind, IoFileRedirectKind::Read)).then(|| {
                        if code.contains("curl") || code.contains("wget") {
                            Input::Download(code)
                        } else {
                            Input::Unknown
                        }
                    })
                }
                IoFileRedirectTarget::Fd(_) | IoFileRedirectTarget::Duplicate(_) => None,
            },
            IoRedirect::OutputAndError(word, append) => {
                let e = self.expand(&word.value, state);
                let op = if *append { Op::Write } else { Op::Overwrite };
                self.out.path(self.paths, &e, &run, op, command);
                None
            }
            IoRedirect::HereString(_, word) => {
                let e = self.expand(&word.value, state);
                Some(if e.literal {
                    Input::Literal(e.text)
                } else {
                    Input::Unknown
                })
            }
            IoRedirect::HereDocument(_, doc) => {
                let body = &doc.doc.value;
                if doc.requires_expansion && (body.contains('$') || body.contains('`')) {
                    self.substitutions_in(body, state);
                    Some(Input::Unknown)
                } else {
                    Some(Input::Literal(body.clone()))
                }
            }
        }
    }
}

/// The variables of a loop condition that is `read` alone (`read -r f`, `read -r a b`).
fn read_names(condition: &CompoundList) -> Option<Vec<String>> {
    let text = condition.to_string();
    let tokens = brush_parser::uncached_tokenize_str(&text, &Default::default()).ok()?;
    let mut words = tokens.iter().map(|t| match t {
        brush_parser::Token::Word(w, _) => Some(w.as_str()),
        brush_parser::Token::Operator(o, _) => (o == ";" || o == "\n").then_some(""),
    });
    if words.next()?? != "read" {
        return None;
    }
    let mut names = Vec::new();
    let mut value_next = false;
    for w in words {
        let w = w?;
        if w.is_empty() {
            continue;
        }
        if value_next {
            value_next = false;
        } else if let Some(flags) = w.strip_prefix('-') {
            value_next = flags.ends_with(['d', 'n', 'N', 'p', 't', 'u', 'a']);
        } else if crate::wrappers::is_assignment(&format!("{w}=")) {
            names.push(w.to_string());
        } else {
            return None;
        }
    }
    (!names.is_empty()).then_some(names)
}

/// Whether a function's body starts the function again in a pipeline or in the background (a
/// fork bomb: `:(){ :|:& };:`).
fn calls_itself(body: &CompoundCommand, name: &str) -> bool {
    let Ok(tokens) = brush_parser::uncached_tokenize_str(&body.to_string(), &Default::default())
    else {
        return false;
    };
    let named = tokens
        .iter()
        .any(|t| matches!(t, brush_parser::Token::Word(w, _) if w == name));
    let forks = tokens
        .iter()
        .any(|t| matches!(t, brush_parser::Token::Operator(o, _) if o == "|" || o == "&"));
    named && forks
}

impl Recurse for Walker<'_> {
    fn path(&mut self, written: &Expanded, run: &Run, op: Op, command: &str) -> Resolved {
        self.out.path(self.paths, written, run, op, command)
    }

    fn command(&mut self, program: &str, args: &[Expanded], run: &Run) -> String {
        self.out.command(program, args, run)
    }

    fn opaque(&mut self, kind: OpaqueKind, text: &str) {
        self.out.opaque(kind, text);
    }

    fn finding(&mut self, kind: FindingKind, command: &str, message: String) {
        self.out.finding(kind, command, "", message);
    }

    fn resolve(&self, written: &str, cwd: Option<&str>) -> Resolved {
        self.paths.resolve(written, cwd, false)
    }

    fn code(&mut self, code: &str, run: &Run, via: &str, args: &[Expanded]) {
        let mut state = State {
            cwd: run.cwd.clone(),
            wrappers: run.wrappers.clone(),
            ..State::default()
        };
        if !args.is_empty() {
            state.set_args(args);
        }
        self.inner(code, &state, via);
    }

    fn argv(&mut self, argv: Vec<Expanded>, run: &Run, stdin: Input) -> Input {
        effects::run(self, argv, run, stdin)
    }

    fn depth_left(&self) -> u32 {
        MAX_DEPTH.saturating_sub(self.depth)
    }

    fn fetched(&mut self, written: &str) {
        if self.fetched.len() < 64 {
            self.fetched.push(written.to_string());
        }
    }

    fn was_fetched(&self, written: &str) -> bool {
        let bare = |t: &str| t.trim_start_matches("./").to_string();
        self.fetched.iter().any(|f| bare(f) == bare(written))
    }
}
