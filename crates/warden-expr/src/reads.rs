//! What a condition run by the script engine reads of each root: the fields it names, down to
//! the values it uses whole, and the keys it reads of maps. The frame hands the engine only
//! that (a partial map of each root, see [`build`]), so a condition that reads
//! `context.turn.token_usage` never converts the history, and one that reads
//! `context.state.get('n', 0)` reads one key of the plugin's state.
//!
//! The partial values answer the emitted script exactly as the whole ones would: a declared
//! field is always present, so a record holds the fields read; a map (or free-form value) read
//! only by constant keys holds those of them it has, and any other value is given whole.

use rhai::{Dynamic, Map};

use crate::check::{Ir, IrKind, Lit};
use crate::native::{self, Native};
use crate::{Facts, Scalar};

/// What a condition reads of a value.
#[derive(Debug, Clone)]
pub(crate) enum Read {
    /// The whole value.
    Whole,
    /// Only these keys of it (when it is a map).
    Keys(Vec<Key>),
    /// Only these fields of it (a record), each read as said.
    Fields(Vec<(String, Read)>),
    /// Not decided yet (only while the reads are collected).
    Pending,
}

/// A key a condition reads.
#[derive(Debug, Clone)]
pub(crate) enum Key {
    /// Written in the condition.
    Const(String),
    /// Computed from scalar facts (`context.history.failures[tool.name]`): evaluated on the
    /// fast path before the script runs; if it is not a string there, the map is read whole.
    Computed(Native, String),
}

/// What a condition reads of one root.
#[derive(Debug, Clone)]
pub(crate) struct RootRead {
    pub(crate) root: String,
    pub(crate) read: Read,
    /// A text that is the same for two reads exactly when they read the same (the frame keeps
    /// one built value per root and rebuilds it only for a condition that reads otherwise).
    pub(crate) id: String,
}

/// What `ir` reads of each root, in the order the roots first appear.
pub(crate) fn collect(ir: &Ir) -> Vec<RootRead> {
    let mut reads: Vec<(String, Read)> = Vec::new();
    visit(ir, &mut reads);
    reads
        .into_iter()
        .map(|(root, read)| {
            let mut id = String::new();
            describe(&read, &mut id);
            RootRead { root, read, id }
        })
        .collect()
}

/// `ir` as a chain of declared fields from a root: the root and the field names.
fn chain(ir: &Ir) -> Option<(&str, Vec<&str>)> {
    match &ir.kind {
        IrKind::Root(name) => Some((name, Vec::new())),
        IrKind::Field { base, name, .. } => {
            let (root, mut fields) = chain(base)?;
            fields.push(name);
            Some((root, fields))
        }
        _ => None,
    }
}

fn key_of(key: &Ir) -> Option<Key> {
    match &key.kind {
        IrKind::Const(Lit::Str(k)) => Some(Key::Const(k.clone())),
        _ if matches!(key.ty, crate::Type::Str) => {
            native::compile(key).map(|n| Key::Computed(n, key.text.clone()))
        }
        _ => None,
    }
}

fn visit(ir: &Ir, reads: &mut Vec<(String, Read)>) {
    match &ir.kind {
        IrKind::Root(_) | IrKind::Field { .. } => match chain(ir) {
            Some((root, fields)) => add(reads, root, &fields, None),
            // A field of something else (an item of a list): what that reads.
            None => {
                if let IrKind::Field { base, .. } = &ir.kind {
                    visit(base, reads);
                }
            }
        },
        IrKind::Key { base, key } | IrKind::Get { base, key, .. } => {
            match (chain(base), key_of(key)) {
                (Some((root, fields)), Some(k)) => {
                    let computed = matches!(k, Key::Computed(..));
                    add(reads, root, &fields, Some(k));
                    if computed {
                        // The script computes the key itself too.
                        visit(key, reads);
                    }
                }
                _ => {
                    visit(base, reads);
                    visit(key, reads);
                }
            }
            if let IrKind::Get { default, .. } = &ir.kind {
                visit(default, reads);
            }
        }
        IrKind::Const(_) | IrKind::Var(_) => {}
        IrKind::List(items) | IrKind::Call(_, items) => {
            for item in items {
                visit(item, reads);
            }
        }
        IrKind::Unary(_, inner) => visit(inner, reads),
        IrKind::Binary(_, a, b) => {
            visit(a, reads);
            visit(b, reads);
        }
        IrKind::Gen {
            iter, elem, filter, ..
        } => {
            visit(iter, reads);
            visit(elem, reads);
            if let Some(f) = filter {
                visit(f, reads);
            }
        }
    }
}

/// Records that the value at `root.fields` is read whole, or by `key`.
fn add(reads: &mut Vec<(String, Read)>, root: &str, fields: &[&str], key: Option<Key>) {
    let i = match reads.iter().position(|(r, _)| r == root) {
        Some(i) => i,
        None => {
            reads.push((root.to_string(), Read::Pending));
            reads.len() - 1
        }
    };
    merge(&mut reads[i].1, fields, key);
}

fn merge(at: &mut Read, fields: &[&str], key: Option<Key>) {
    if matches!(at, Read::Whole) {
        return;
    }
    match fields.split_first() {
        None => match (key, &mut *at) {
            (Some(k), Read::Keys(ks)) => ks.push(k),
            (Some(k), Read::Pending) => *at = Read::Keys(vec![k]),
            // Read whole (or both as a record and by keys, which no value is).
            _ => *at = Read::Whole,
        },
        Some((first, rest)) => {
            if matches!(at, Read::Pending) {
                *at = Read::Fields(Vec::new());
            }
            let Read::Fields(fs) = at else {
                *at = Read::Whole;
                return;
            };
            let i = match fs.iter().position(|(n, _)| n == first) {
                Some(i) => i,
                None => {
                    fs.push((first.to_string(), Read::Pending));
                    fs.len() - 1
                }
            };
            merge(&mut fs[i].1, rest, key);
        }
    }
}

fn describe(read: &Read, out: &mut String) {
    match read {
        Read::Whole | Read::Pending => out.push('*'),
        Read::Keys(ks) => {
            out.push('[');
            for k in ks {
                match k {
                    Key::Const(s) => {
                        out.push_str(&format!("{s:?}"));
                    }
                    Key::Computed(_, text) => {
                        out.push('=');
                        out.push_str(&format!("{text:?}"));
                    }
                }
                out.push(',');
            }
            out.push(']');
        }
        Read::Fields(fs) => {
            out.push('{');
            for (name, r) in fs {
                out.push_str(name);
                out.push(':');
                describe(r, out);
                out.push(',');
            }
            out.push('}');
        }
    }
}

/// The value of `read` below `path`, as the script engine will see it.
pub(crate) fn build<'r>(facts: &dyn Facts, path: &mut Vec<&'r str>, read: &'r Read) -> Dynamic {
    match read {
        Read::Whole | Read::Pending => facts.value(path, None),
        Read::Keys(keys) => {
            let mut names: Vec<String> = Vec::with_capacity(keys.len());
            for k in keys {
                match k {
                    Key::Const(s) => names.push(s.clone()),
                    Key::Computed(n, _) => match n.eval(facts) {
                        Ok(Scalar::Str(s)) => names.push(s.to_string()),
                        // Not a key the map can hold: the script says what is wrong with it.
                        _ => return facts.value(path, None),
                    },
                }
            }
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            facts.value(path, Some(&names))
        }
        Read::Fields(fields) => {
            let mut map = Map::new();
            for (name, r) in fields {
                path.push(name);
                map.insert(name.as_str().into(), build(facts, path, r));
                path.pop();
            }
            Dynamic::from_map(map)
        }
    }
}
