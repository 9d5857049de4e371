//! The shape of the data a condition may read, declared by the embedder.
//!
//! A [`Schema`] names the roots an expression can start from (`context`, `result`...), the
//! records they lead to and the type of every field. Field paths are checked against it when a
//! condition is compiled, so `context.turn.tokn_usage` is a load error that names
//! `token_usage`. Parts of the data whose keys are not known in advance (a tool's result, user
//! settings) are typed [`Type::Any`] or [`Type::Map`]: any key may be read, and a key that is
//! missing at run time makes the condition *undetermined* rather than false.
//!
//! Scalar fields that the embedder can read without building a script value carry a
//! [`ScalarId`]; conditions made only of those (threshold rules) skip the script engine.

use std::fmt;

/// Index of a record type in its [`Schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordId(pub(crate) usize);

/// An embedder-chosen id for a scalar field that [`crate::Facts::scalar`] can read directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScalarId(pub u16);

/// An embedder-chosen id for a string-keyed map of scalars that [`crate::Facts::map_get`]
/// can read directly (failure counts per tool, say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MapId(pub u16);

/// The static type of a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Type {
    /// Anything: free-form data whose shape is not known at load.
    Any,
    /// Only `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A 64-bit signed integer.
    Int,
    /// A 64-bit float.
    Float,
    /// A string.
    Str,
    /// A list whose items have the given type.
    List(Box<Type>),
    /// A map from string keys (not known at load) to values of the given type.
    Map(Box<Type>),
    /// A record with the fields the schema declares.
    Record(RecordId),
    /// A value of the inner type, or `null`.
    Nullable(Box<Type>),
}

impl Type {
    /// A list of `item`.
    pub fn list(item: Type) -> Type {
        Type::List(Box::new(item))
    }

    /// A map of string keys to `value`.
    pub fn map(value: Type) -> Type {
        Type::Map(Box::new(value))
    }

    /// `inner` or null.
    pub fn nullable(inner: Type) -> Type {
        Type::Nullable(Box::new(inner))
    }

    pub(crate) fn is_numeric(&self) -> bool {
        matches!(self, Type::Int | Type::Float)
    }

    /// The type without its nullability.
    pub(crate) fn strip_null(&self) -> &Type {
        match self {
            Type::Nullable(inner) => inner,
            other => other,
        }
    }

    /// The type as messages name it, with its article ("an integer", "a list").
    pub(crate) fn name(&self, schema: &Schema) -> String {
        match self {
            Type::Any => "a free-form value".into(),
            Type::Null => "null".into(),
            Type::Bool => "a boolean".into(),
            Type::Int => "an integer".into(),
            Type::Float => "a number".into(),
            Type::Str => "a string".into(),
            Type::List(_) => "a list".into(),
            Type::Map(_) => "a map".into(),
            Type::Record(id) => format!("a `{}` record", schema.records[id.0].name),
            Type::Nullable(inner) => format!("{} or null", inner.name(schema)),
        }
    }
}

/// How a field gets its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Binding {
    /// Stored under its own name in the parent value.
    Stored,
    /// Another spelling of the expression given (absolute, starting at a root).
    Alias(String),
}

/// One field of a record.
#[derive(Debug, Clone)]
pub struct FieldDef {
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) doc: String,
    pub(crate) scalar: Option<ScalarId>,
    pub(crate) map: Option<MapId>,
    pub(crate) binding: Binding,
}

impl FieldDef {
    /// A stored field of type `ty`.
    pub fn new(name: &str, ty: Type, doc: &str) -> Self {
        FieldDef {
            name: name.into(),
            ty,
            doc: doc.into(),
            scalar: None,
            map: None,
            binding: Binding::Stored,
        }
    }

    /// A scalar field the embedder can also read directly by `id` (see [`crate::Facts`]).
    pub fn scalar(mut self, id: ScalarId) -> Self {
        self.scalar = Some(id);
        self
    }

    /// A map of scalars the embedder can also read directly by `id` (see [`crate::Facts`]).
    pub fn direct_map(mut self, id: MapId) -> Self {
        self.map = Some(id);
        self
    }

    /// A field that is another spelling of `target`, an absolute path such as
    /// `context.turn.token_usage`. Its type is the target's.
    pub fn alias(name: &str, target: &str, doc: &str) -> Self {
        FieldDef {
            name: name.into(),
            ty: Type::Any,
            doc: doc.into(),
            scalar: None,
            map: None,
            binding: Binding::Alias(target.into()),
        }
    }

    /// The field's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its documentation.
    pub fn doc(&self) -> &str {
        &self.doc
    }

    /// The target path if this field is an alias.
    pub fn alias_of(&self) -> Option<&str> {
        match &self.binding {
            Binding::Alias(target) => Some(target),
            Binding::Stored => None,
        }
    }
}

/// A record type: a name (for messages) and its fields.
#[derive(Debug, Clone)]
pub struct RecordDef {
    pub(crate) name: String,
    pub(crate) fields: Vec<FieldDef>,
}

impl RecordDef {
    /// The record's name, as messages show it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its fields, in declaration order.
    pub fn fields(&self) -> &[FieldDef] {
        &self.fields
    }

    pub(crate) fn field(&self, name: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A name an expression can start from.
#[derive(Debug, Clone)]
pub struct RootDef {
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) doc: String,
    pub(crate) binding: Binding,
    pub(crate) hidden: bool,
}

impl RootDef {
    /// The root's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its documentation.
    pub fn doc(&self) -> &str {
        &self.doc
    }

    /// Whether expressions written by authors may name it (hidden roots back aliases).
    pub fn is_hidden(&self) -> bool {
        self.hidden
    }
}

/// A helper function defined as an expression over its parameters
/// (`context_above_threshold(t)` is `context.turn.token_usage >= t`).
#[derive(Debug, Clone)]
pub struct MacroDef {
    pub(crate) name: String,
    pub(crate) params: Vec<String>,
    pub(crate) body: String,
    pub(crate) doc: String,
}

impl MacroDef {
    /// The helper's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its parameter names.
    pub fn params(&self) -> &[String] {
        &self.params
    }

    /// The expression it stands for.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Its documentation.
    pub fn doc(&self) -> &str {
        &self.doc
    }
}

/// Everything a condition may read, and the helpers it may call. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub(crate) records: Vec<RecordDef>,
    pub(crate) roots: Vec<RootDef>,
    pub(crate) macros: Vec<MacroDef>,
}

impl Schema {
    /// An empty schema.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a record type; use the returned id in [`Type::Record`].
    pub fn record(&mut self, name: &str, fields: Vec<FieldDef>) -> RecordId {
        self.records.push(RecordDef {
            name: name.into(),
            fields,
        });
        RecordId(self.records.len() - 1)
    }

    /// Declares a root name of type `ty`.
    pub fn root(&mut self, name: &str, ty: Type, doc: &str) -> &mut Self {
        self.roots.push(RootDef {
            name: name.into(),
            ty,
            doc: doc.into(),
            binding: Binding::Stored,
            hidden: false,
        });
        self
    }

    /// Declares a root that authors cannot name, only aliases can (`context.state` is backed
    /// by a hidden root so the embedder can supply it separately for each plugin).
    pub fn hidden_root(&mut self, name: &str, ty: Type) -> &mut Self {
        self.roots.push(RootDef {
            name: name.into(),
            ty,
            doc: String::new(),
            binding: Binding::Stored,
            hidden: true,
        });
        self
    }

    /// Declares a root name that is another spelling of `target` (`token_usage` for
    /// `context.turn.token_usage`).
    pub fn root_alias(&mut self, name: &str, target: &str, doc: &str) -> &mut Self {
        self.roots.push(RootDef {
            name: name.into(),
            ty: Type::Any,
            doc: doc.into(),
            binding: Binding::Alias(target.into()),
            hidden: false,
        });
        self
    }

    /// Declares a helper function defined by an expression over `params`.
    pub fn helper(&mut self, name: &str, params: &[&str], body: &str, doc: &str) -> &mut Self {
        self.macros.push(MacroDef {
            name: name.into(),
            params: params.iter().map(|p| p.to_string()).collect(),
            body: body.into(),
            doc: doc.into(),
        });
        self
    }

    /// The declared roots, in declaration order.
    pub fn roots(&self) -> &[RootDef] {
        &self.roots
    }

    /// A record type by id.
    pub fn record_def(&self, id: RecordId) -> &RecordDef {
        &self.records[id.0]
    }

    /// The declared helpers.
    pub fn helpers(&self) -> &[MacroDef] {
        &self.macros
    }

    pub(crate) fn root_def(&self, name: &str) -> Option<&RootDef> {
        self.roots.iter().find(|r| r.name == name)
    }

    pub(crate) fn macro_def(&self, name: &str) -> Option<&MacroDef> {
        self.macros.iter().find(|m| m.name == name)
    }

    /// Every valid dotted path, for documentation and for suggestions (`context.turn.number`...).
    pub fn paths(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for root in self.roots.iter().filter(|r| !r.hidden) {
            out.push((root.name.clone(), root.doc.clone()));
            if let Type::Record(id) = root.ty.strip_null() {
                self.collect_paths(&root.name, *id, &mut out, 0);
            }
        }
        out
    }

    fn collect_paths(
        &self,
        prefix: &str,
        id: RecordId,
        out: &mut Vec<(String, String)>,
        depth: usize,
    ) {
        if depth > 8 {
            return;
        }
        for f in &self.records[id.0].fields {
            let path = format!("{prefix}.{}", f.name);
            out.push((path.clone(), f.doc.clone()));
            if let Type::Record(inner) = f.ty.strip_null() {
                self.collect_paths(&path, *inner, out, depth + 1);
            }
        }
    }
}

impl fmt::Display for ScalarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "scalar#{}", self.0)
    }
}
