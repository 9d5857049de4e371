//! What a script reads: the [`Host`] an embedder implements to answer `root.key` lookups, and
//! [`Out`], where it writes each answer (a value, a serialized value, or a record).

use std::collections::HashMap;

use mlua::{Function, IntoLua, Lua, LuaSerdeExt, Table, Value};

use crate::journal::Recorded;

/// Where a run's data comes from: the embedder's frame of the current tick.
pub trait Host {
    /// Writes the value of `root.key` into `out` (`root` is `context`, `event`, `tool` or
    /// `result`); writing nothing means `nil`. Called each time a script reads the field, so
    /// the host must answer the same within a tick.
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()>;

    /// The tool result when it is not a table (a string, a number...), or `None` when the
    /// result is a table (read lazily through [`Host::field`]) or absent (see
    /// [`Host::has_result`]).
    fn result_value(&self, _lua: &Lua) -> mlua::Result<Option<Value>> {
        Ok(None)
    }

    /// Whether this tick has a tool result at all.
    fn has_result(&self) -> bool {
        false
    }

    /// Whether this tick concerns a tool.
    fn has_tool(&self) -> bool {
        false
    }
}

/// Where a [`Host`] writes a field's value. Records (a few named values) are handed over as
/// values for a Lua constructor made once per shape, which costs far less than building tables
/// through the C API under a memory limit.
pub struct Out<'a> {
    pub(crate) lua: &'a Lua,
    pub(crate) ctors: &'a mut HashMap<CtorKey, Function>,
    /// The field names of a record written by [`Out::record`] (for the replay record).
    pub(crate) shape: Option<&'static [&'static str]>,
    /// The record marker, and the read-only view metatable and private key of the prelude.
    pub(crate) record: &'a Table,
    pub(crate) views: &'a (Table, Table),
    pub(crate) values: Vec<Value>,
}

impl Out<'_> {
    /// The Lua state, to convert values the other methods do not cover.
    pub fn lua(&self) -> &Lua {
        self.lua
    }

    /// The field is this value (an integer, a number, a boolean, a string, a converted table).
    pub fn value(&mut self, v: impl IntoLua) -> mlua::Result<()> {
        self.shape = None;
        self.values.clear();
        self.values.push(v.into_lua(self.lua)?);
        Ok(())
    }

    /// The field is a serializable value, converted whole (lists, free-form data).
    pub fn serialize<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> mlua::Result<()> {
        let options = mlua::serde::SerializeOptions::new()
            .serialize_none_to_null(false)
            .serialize_unit_to_null(false)
            .set_array_metatable(false);
        let v = self.lua.to_value_with(v, options)?;
        self.shape = None;
        self.values.clear();
        self.values.push(v);
        Ok(())
    }

    /// The field is a record: `keys` (Lua identifiers, the same slice for the same shape)
    /// with their `values`, in order.
    pub fn record(&mut self, keys: &'static [&'static str], values: &[Value]) -> mlua::Result<()> {
        let shape = CtorKey::Static(keys.as_ptr() as usize, keys.len());
        let ctor = match self.ctors.get(&shape) {
            Some(f) => f.clone(),
            None => {
                let f = record_ctor(self.lua, keys, self.views)?;
                self.ctors.insert(shape, f.clone());
                f
            }
        };
        self.shape = Some(keys);
        self.values.clear();
        self.values.push(Value::Table(self.record.clone()));
        self.values.push(Value::Function(ctor));
        self.values
            .extend(keys.iter().zip(values).map(|(_, v)| v.clone()));
        Ok(())
    }

    /// What was written, as the replay record keeps it.
    pub(crate) fn recorded(&self) -> Result<Recorded, String> {
        match (self.shape, self.values.first()) {
            (Some(keys), _) => Ok(Recorded::Record {
                record: keys.iter().map(|k| (*k).to_string()).collect(),
                values: self.values[2..]
                    .iter()
                    .map(Recorded::of)
                    .collect::<Result<_, _>>()?,
            }),
            (None, Some(v)) => Recorded::of(v),
            (None, None) => Ok(Recorded::Nil),
        }
    }
}

/// What a record constructor is cached by: the field-name slice a host passes (its address),
/// or the names themselves (a replayed record).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum CtorKey {
    Static(usize, usize),
    Named(String),
}

/// A Lua function that makes a record of `keys` (its values as arguments): a read-only view
/// which, unlike a view of free-form data, knows its fields, so a misspelt one is an error.
pub(crate) fn record_ctor<K: AsRef<str>>(
    lua: &Lua,
    keys: &[K],
    (ro, real): &(Table, Table),
) -> mlua::Result<Function> {
    if let Some(bad) = keys.iter().find(|k| !is_identifier(k.as_ref())) {
        return Err(mlua::Error::RuntimeError(format!(
            "record key `{}` is not a Lua name",
            bad.as_ref()
        )));
    }
    let keys: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
    let params: Vec<String> = (0..keys.len()).map(|i| format!("a{i}")).collect();
    let fields: Vec<String> = keys
        .iter()
        .zip(&params)
        .map(|(k, p)| format!("{k} = {p}"))
        .collect();
    let known: Vec<String> = keys.iter().map(|k| format!("{k} = true")).collect();
    let source = format!(
        "local RO, REAL, setmetatable = ...\n\
         local KNOWN = {{ {known} }}\n\
         local MT = {{}}\n\
         for k, v in next, RO do MT[k] = v end\n\
         local get = RO.__index\n\
         MT.__index = function(p, k)\n\
           local v = get(p, k)\n\
           if v == nil and not KNOWN[k] then\n\
             error(\"no field `\" .. tostring(k) .. \"` in this record; its fields are {list}\", 2)\n\
           end\n\
           return v\n\
         end\n\
         return function({params}) return setmetatable({{ [REAL] = {{ {fields} }} }}, MT) end",
        known = known.join(", "),
        list = keys.join(", "),
        params = params.join(", "),
        fields = fields.join(", ")
    );
    lua.load(source).set_name("=warden-record").call((
        ro.clone(),
        real.clone(),
        lua.globals().raw_get::<Function>("setmetatable")?,
    ))
}

fn is_identifier(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}
