//! What a script reads: the [`Host`] an embedder implements to answer `root.key` lookups, and
//! [`Out`], where it writes each answer (a value, a serialized value, or a record).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use mlua::{Function, IntoLua, Lua, LuaSerdeExt, MultiValue, RegistryKey, Table, Value, ffi};

use crate::journal::Recorded;

/// Where a run's data comes from: the embedder's frame of the current tick.
pub trait Host {
    /// Writes the value of `root.key` into `out` (`root` is `context`, `event`, `tool`,
    /// `result` or `settings`); writing nothing means `nil`. Called when a run first reads the
    /// field (its answer is kept for the rest of the run), or at every read of a run that
    /// records or replays what it reads; and, for a few fields earlier runs read whose answers
    /// were a record, a text, a number or a boolean, at the start of each run (the answer is
    /// then kept in place from run to run, brought up to date with each run's tick). The host
    /// must answer the same within a tick.
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()>;

    /// The tool result when it is not a table (a string, a number...): asked only when
    /// [`Host::shape`] says [`ResultShape::Plain`]; `None` reads as `nil`.
    fn result_value(&self, _lua: &Lua) -> mlua::Result<Option<Value>> {
        Ok(None)
    }

    /// What the tick holds apart from its fields: whether it concerns a tool, and the kind of
    /// its tool result. Asked once at the start of each run (one call, where three would cost
    /// a run about 70 instructions more). The default is no tool and no result: a host whose
    /// ticks have results says which kind here, or [`Host::result_value`] is never asked.
    fn shape(&self) -> Shape {
        Shape::default()
    }
}

/// What a tick holds apart from its fields ([`Host::shape`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// The tick concerns a tool.
    pub tool: bool,
    /// The kind of the tick's tool result.
    pub result: ResultShape,
}

/// The kind of a tick's tool result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResultShape {
    /// The tick has no result.
    #[default]
    None,
    /// A table: read lazily, a field at a time, through [`Host::field`].
    Table,
    /// Another value (a string, a number, a list...): converted whole, through
    /// [`Host::result_value`], at the start of the run.
    Plain,
}

/// Where a [`Host`] writes a field's value. Each answer becomes a Lua value at once, in one
/// protected call on the Lua API (`deliver`) that reads the host's data where it is: a
/// record's view, a string, a read-only view of a table; kept in the run's memo of its root.
pub struct Out<'a> {
    pub(crate) lua: &'a Lua,
    /// The stack the answer goes on: the reading coroutine's, in the call of `fetch`.
    pub(crate) stack: *mut ffi::lua_State,
    pub(crate) shapes: &'a mut Shapes,
    /// Where the answer is kept for the run (none when the run records or replays).
    pub(crate) keep: Option<Keep>,
    /// The name `context.state`'s view is given, for a table answer of that field.
    pub(crate) state: Option<&'a RegistryKey>,
    /// The answer as the replay record keeps it, when the run records.
    pub(crate) recorded: Option<Recorded>,
    pub(crate) recording: bool,
    /// Whether an answer was delivered (nothing written means nil).
    pub(crate) delivered: bool,
    /// What the answer was kept as for the next runs too (see `fetch::refresh`), when it was.
    pub(crate) persisted: Option<Kind>,
    /// When the host answers again for an answer kept across runs (at the start of a run):
    /// where it is, and whether it was brought up to date in place.
    pub(crate) refresh: Option<Refresh<'a>>,
}

/// What an answer kept across runs is: its record's shape and the values its view holds when
/// they are all numbers, booleans or nil (the view is refilled in place when the host's differ),
/// a text (kept while the host's text is the same), or a number or boolean (set again).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Record(usize, Option<Vec<Plain>>),
    Text(Box<str>),
    Scalar,
}

/// An answer kept across runs, asked again: what it was, where its memo and key are (`list[at]`
/// and `list[at + 1]`, the list at `list` on the stack), and whether the host's answer was put
/// in place (else it is let go).
pub(crate) struct Refresh<'a> {
    pub(crate) kind: &'a mut Kind,
    pub(crate) list: c_int,
    pub(crate) at: ffi::lua_Integer,
    pub(crate) fresh: bool,
}

impl Out<'_> {
    /// The Lua state, to convert values the other methods do not cover.
    pub fn lua(&self) -> &Lua {
        self.lua
    }

    fn deliver(&mut self, payload: Payload<'_>) -> mlua::Result<()> {
        if let Some(r) = &mut self.refresh {
            // SAFETY: `stack` holds the list `fetch::refresh` reads, with room; the
            // runtime's lock is held and no Lua code runs on it.
            r.fresh = unsafe { refresh(self.stack, self.shapes, r, payload) };
            self.delivered = true;
            return Ok(());
        }
        if self.recording {
            self.recorded = Some(payload.recorded().map_err(mlua::Error::RuntimeError)?);
        }
        let persisted = deliver(
            self.lua,
            self.stack,
            self.shapes,
            payload,
            self.keep,
            self.state,
        )?;
        if persisted {
            self.persisted = Some(match payload {
                Payload::Record(n, _, values) => {
                    Kind::Record(n, values.iter().map(Plain::of).collect())
                }
                Payload::Text(t) => Kind::Text(t.into()),
                _ => Kind::Scalar,
            });
        }
        self.delivered = true;
        Ok(())
    }

    /// Nothing was written: the answer is nil (never kept).
    pub(crate) fn nothing(&mut self) -> mlua::Result<()> {
        if self.recording {
            self.recorded = Some(Recorded::Nil);
        }
        // SAFETY: `stack` is the stack of the `fetch` call in progress (the lock is held);
        // pushing nil after a check of room neither allocates nor raises.
        unsafe {
            if ffi::lua_checkstack(self.stack, 1) == 0 {
                return Err(mlua::Error::StackError);
            }
            ffi::lua_pushnil(self.stack);
        }
        Ok(())
    }

    /// The field is this value (an integer, a number, a boolean, a string, a converted table).
    pub fn value(&mut self, v: impl IntoLua) -> mlua::Result<()> {
        let v = v.into_lua(self.lua)?;
        self.deliver(Payload::of(&v))
    }

    /// The field is this text (the same as [`Out::value`] with a string, without making a Lua
    /// string first).
    pub fn text(&mut self, s: &str) -> mlua::Result<()> {
        self.deliver(Payload::Text(s))
    }

    /// The field is a serializable value, converted whole (lists, free-form data).
    pub fn serialize<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> mlua::Result<()> {
        let options = mlua::serde::SerializeOptions::new()
            .serialize_none_to_null(false)
            .serialize_unit_to_null(false)
            .set_array_metatable(false);
        let v = self.lua.to_value_with(v, options)?;
        self.deliver(Payload::of(&v))
    }

    /// The field is a record: `keys` (Lua identifiers, the same slice for the same shape)
    /// with their `values`, in order.
    pub fn record(&mut self, keys: &'static [&'static str], values: &[Value]) -> mlua::Result<()> {
        let shape = self.shapes.shape(
            self.lua,
            ShapeKey::Static(keys.as_ptr() as usize, keys.len()),
            keys,
        )?;
        let values = &values[..values.len().min(keys.len())];
        self.deliver(Payload::Record(shape, keys, values))
    }
}

/// An answer as the host wrote it, read where it is.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    Nil,
    /// A value, as it is.
    Value(&'a Value),
    /// A table, given as a read-only view.
    Table(&'a Value),
    Text(&'a str),
    /// A record of the shape of this number, its field names, and its values.
    Record(usize, &'a [&'a str], &'a [Value]),
}

impl<'a> Payload<'a> {
    pub(crate) fn of(v: &'a Value) -> Self {
        match v {
            Value::Nil => Payload::Nil,
            Value::Table(_) => Payload::Table(v),
            _ => Payload::Value(v),
        }
    }

    /// The answer as the replay record keeps it.
    fn recorded(&self) -> Result<Recorded, String> {
        Ok(match *self {
            Payload::Nil => Recorded::Nil,
            Payload::Value(v) | Payload::Table(v) => Recorded::of(v)?,
            Payload::Text(s) => Recorded::Str(s.to_string()),
            Payload::Record(_, keys, values) => Recorded::Record {
                record: keys.iter().map(|k| (*k).to_string()).collect(),
                values: values.iter().map(Recorded::of).collect::<Result<_, _>>()?,
            },
        })
    }
}

/// What a record's shape is known by: the field-name slice a host passes (its address), or
/// the names themselves (a replayed record).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum ShapeKey {
    Static(usize, usize),
    Named(String),
}

/// What the prelude hands over once: the metatable of records, `freeze`, the view of
/// `context.state`, and the maker of a shape. Those pushed while an answer is built are held
/// in the registry, to be pushed straight onto the reading coroutine's stack.
pub(crate) struct Views {
    pub(crate) record: RegistryKey,
    pub(crate) freeze: RegistryKey,
    pub(crate) state_view: RegistryKey,
    pub(crate) shape: Function,
}

/// The record shapes of a state, met as hosts hand records out: each the prelude's SHAPE table.
pub(crate) struct Shapes {
    pub(crate) views: Option<Views>,
    /// Where kept answers are listed (memo, key, memo, key...), to be let go when the run ends.
    pub(crate) kept: Option<RegistryKey>,
    /// Where the answers kept across runs are listed, likewise (see `fetch::refresh`).
    pub(crate) persist: Option<RegistryKey>,
    /// The reusable record views, by shape (`cache[2n + 1]`: the view of shape `n`, `cache[2n +
    /// 2]`: its values), and which
    /// of them the run in progress was handed (see [`Lent`]).
    pub(crate) cache: Option<RegistryKey>,
    pub(crate) lent: Lent,
    known: Vec<(ShapeKey, RegistryKey)>,
}

/// Which reusable record views (one bit per shape, the first 64 shapes) runs were handed since
/// the runtime last looked (see `run.rs`): a view handed out is refilled by a later run only if
/// nothing a script can reach still holds it when its run ends.
pub(crate) type Lent = std::sync::Arc<std::sync::atomic::AtomicU64>;

impl Shapes {
    pub(crate) fn new() -> Self {
        Shapes {
            views: None,
            kept: None,
            persist: None,
            cache: None,
            lent: Lent::default(),
            known: Vec::new(),
        }
    }

    /// The number of the shape `key` (of fields `keys`), made on first use.
    pub(crate) fn shape<K: AsRef<str>>(
        &mut self,
        lua: &Lua,
        key: ShapeKey,
        keys: &[K],
    ) -> mlua::Result<usize> {
        // A handful of shapes: a scan is cheaper than hashing.
        if let Some(n) = self.known.iter().position(|(k, _)| *k == key) {
            return Ok(n);
        }
        let Some(views) = &self.views else {
            return Err(mlua::Error::RuntimeError("the sandbox is not ready".into()));
        };
        if let Some(bad) = keys.iter().find(|k| !is_identifier(k.as_ref())) {
            return Err(mlua::Error::RuntimeError(format!(
                "record key `{}` is not a Lua name",
                bad.as_ref()
            )));
        }
        let list: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
        let mut args = vec![Value::String(lua.create_string(list.join(", "))?)];
        for k in &list {
            args.push(Value::String(lua.create_string(k)?));
        }
        let shape: Table = views.shape.call(MultiValue::from_vec(args))?;
        self.known.push((key, lua.create_registry_value(shape)?));
        Ok(self.known.len() - 1)
    }

    /// A record of the fields `keys` with `values` (a replayed record inside a table), built
    /// now, during a run.
    pub(crate) fn build(
        &mut self,
        lua: &Lua,
        keys: &[String],
        values: Vec<Value>,
    ) -> mlua::Result<Value> {
        let shape = self.shape(lua, ShapeKey::Named(keys.join(",")), keys)?;
        let names: Vec<&str> = keys.iter().map(String::as_str).collect();
        let values = &values[..values.len().min(keys.len())];
        // SAFETY: the lock is held (a run is in progress); `deliver` leaves the record on top of
        // the stack it is given, where it is popped.
        unsafe {
            lua.exec_raw_lua(|raw| {
                deliver(
                    lua,
                    raw.state(),
                    self,
                    Payload::Record(shape, &names, values),
                    None,
                    None,
                )?;
                Ok(raw.pop_value())
            })
        }
    }
}

/// The keys of a view's real table, of a record's values and of a shape's MISS (light
/// userdata: only the host can make them, no script can name them).
static REAL_KEY: u8 = 0;
static RECORD_KEY: u8 = 0;
static MISS_KEY: u8 = 0;

pub(crate) fn real_key() -> *mut c_void {
    std::ptr::addr_of!(REAL_KEY) as *mut c_void
}

pub(crate) fn record_key() -> *mut c_void {
    std::ptr::addr_of!(RECORD_KEY) as *mut c_void
}

pub(crate) fn miss_key() -> *mut c_void {
    std::ptr::addr_of!(MISS_KEY) as *mut c_void
}

/// The `__index` of records: the field from the record's values, at the place its shape gives
/// it; a field the shape lacks goes to the shape's MISS, which raises. A C function, with no
/// Rust value to drop, so that the error may unwind through it.
pub(crate) unsafe extern "C-unwind" fn record_index(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls it with the view and the key (and at least 20 free slots); a record
    // holds its values under RECORD_KEY: a userdata whose first user value is its shape.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE {
            return 0;
        }
        // 3: the values; 4: the shape; 5: the field's place.
        if ffi::lua_rawgetp(state, 1, record_key()) != ffi::LUA_TUSERDATA {
            return 0;
        }
        if ffi::lua_getiuservalue(state, 3, 1) != ffi::LUA_TTABLE {
            return 0;
        }
        ffi::lua_pushvalue(state, 2);
        if ffi::lua_rawget(state, 4) == ffi::LUA_TNUMBER {
            let at = ffi::lua_tointegerx(state, 5, std::ptr::null_mut());
            ffi::lua_getiuservalue(state, 3, at as c_int);
            return 1;
        }
        ffi::lua_rawgetp(state, 4, miss_key());
        ffi::lua_pushvalue(state, 2);
        ffi::lua_call(state, 1, 1);
        1
    }
}

/// `record_at(view, i)`, for the prelude: a record's user value `i` (1: its shape, then its
/// values), or nothing.
pub(crate) unsafe extern "C-unwind" fn record_at(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls it with at least 20 free slots; reading tables, a userdata's user
    // values and an integer neither allocates nor raises.
    unsafe {
        if ffi::lua_type(state, 1) != ffi::LUA_TTABLE
            || ffi::lua_rawgetp(state, 1, record_key()) != ffi::LUA_TUSERDATA
        {
            return 0;
        }
        let mut isnum = 0;
        let i = ffi::lua_tointegerx(state, 2, &mut isnum);
        if isnum == 0 || !(1..=i64::from(c_int::MAX)).contains(&i) {
            return 0;
        }
        ffi::lua_getiuservalue(state, -1, i as c_int);
        1
    }
}

/// Where an answer is kept: the memo of its root and the key, in the stack of `fetch`, and
/// where in the list of kept answers it goes.
#[derive(Clone, Copy)]
pub(crate) struct Keep {
    pub(crate) memo: c_int,
    pub(crate) key: c_int,
    pub(crate) at: ffi::lua_Integer,
    /// Where it goes in the list of answers kept across runs, if it may be (0: it may not).
    pub(crate) persist: ffi::lua_Integer,
}

/// The parameters of one call of `build`.
struct Build<'a> {
    lua: &'a Lua,
    payload: Payload<'a>,
    shapes: &'a Shapes,
    views: &'a Views,
    /// The name of a `context.state` view (`state`, `session_state`), for a table given so.
    state: Option<&'a RegistryKey>,
    /// Where it is listed among the kept answers, when kept.
    at: ffi::lua_Integer,
    /// Whether a record may be given as its shape's reusable view (an answer kept in the memo
    /// of a run that neither records nor replays).
    reuse: bool,
    /// Where the answer goes in the list of answers kept across runs (0: it may not be), and
    /// whether it went there.
    persist: ffi::lua_Integer,
    persisted: std::cell::Cell<bool>,
}

/// Makes `payload` a Lua value on top of `stack` (the stack of the `fetch` call in progress),
/// in one protected call: a record's view and values, a string, a read-only view of a table.
/// With `keep`, the value is also kept in the memo for the key (both in that stack) and listed
/// among the kept answers, or among the answers kept across runs (a text, a number or a
/// boolean, a record given as its shape's reusable view) when `keep` allows it: then it returns
/// true. `state` names the view of `context.state` a table answer is given as.
pub(crate) fn deliver(
    lua: &Lua,
    stack: *mut ffi::lua_State,
    shapes: &Shapes,
    payload: Payload<'_>,
    keep: Option<Keep>,
    state: Option<&RegistryKey>,
) -> mlua::Result<bool> {
    let (Some(views), Some(kept), Some(persist)) = (&shapes.views, &shapes.kept, &shapes.persist)
    else {
        return Err(mlua::Error::RuntimeError("the sandbox is not ready".into()));
    };
    // SAFETY: `stack` is a coroutine of the state, in a call during a run (the lock is held).
    // Room is checked first; `build` runs under `lua_pcall`, so what it raises (out of memory,
    // an error of `freeze`) comes back as a status, and it holds no Rust value that needs
    // dropping while it may raise.
    unsafe {
        let s = stack;
        if ffi::lua_checkstack(s, 8) == 0 {
            return Err(mlua::Error::StackError);
        }
        let params = Build {
            lua,
            payload,
            shapes,
            views,
            state,
            at: keep.map_or(0, |k| k.at),
            reuse: keep.is_some(),
            persist: keep.map_or(0, |k| k.persist),
            persisted: std::cell::Cell::new(false),
        };
        ffi::lua_pushcfunction(s, build);
        ffi::lua_pushlightuserdata(s, std::ptr::addr_of!(params) as *mut c_void);
        let nargs = match keep {
            Some(k) => {
                ffi::lua_pushvalue(s, k.memo);
                ffi::lua_pushvalue(s, k.key);
                registry(s, kept);
                registry(s, persist);
                5
            }
            None => 1,
        };
        match ffi::lua_pcall(s, nargs, 1, 0) {
            ffi::LUA_OK => Ok(params.persisted.get()),
            ffi::LUA_ERRMEM => {
                ffi::lua_pop(s, 1);
                Err(mlua::Error::MemoryError("not enough memory".into()))
            }
            _ => lua.exec_raw_lua(|raw| {
                // The error object, read where mlua reads values.
                let m = raw.state();
                if m != s {
                    if ffi::lua_checkstack(m, 1) == 0 {
                        ffi::lua_pop(s, 1);
                        return Err(mlua::Error::StackError);
                    }
                    ffi::lua_xmove(s, m, 1);
                }
                match raw.pop_value() {
                    Value::Error(e) => Err(*e),
                    Value::String(m) => Err(mlua::Error::RuntimeError(m.to_string_lossy())),
                    _ => Err(mlua::Error::RuntimeError(
                        "internal: a field could not be given to the script".into(),
                    )),
                }
            }),
        }
    }
}

/// Pushes the value `key` holds in the registry onto `state`.
///
/// # Safety
/// `state` is a coroutine of the state whose registry `key` is in, with a free slot.
unsafe fn registry(state: *mut ffi::lua_State, key: &RegistryKey) {
    unsafe {
        ffi::lua_rawgeti(
            state,
            ffi::LUA_REGISTRYINDEX,
            ffi::lua_Integer::from(key.id()),
        );
    }
}

/// Pushes `v` onto `state`: a plain value (a number, a boolean, nil) directly, a reference (a
/// string, a table...) through mlua, onto the stack mlua pushes on, then moved.
///
/// # Safety
/// `state` is a coroutine of `lua`'s state with a free slot, during a run (the lock is held).
unsafe fn push_value(lua: &Lua, state: *mut ffi::lua_State, v: &Value) {
    unsafe {
        match *v {
            Value::Nil => ffi::lua_pushnil(state),
            Value::Boolean(b) => ffi::lua_pushboolean(state, c_int::from(b)),
            Value::Integer(n) => ffi::lua_pushinteger(state, n),
            Value::Number(x) => ffi::lua_pushnumber(state, x),
            Value::LightUserData(p) => ffi::lua_pushlightuserdata(state, p.0),
            _ => lua.exec_raw_lua(|raw| {
                let m = raw.state();
                if ffi::lua_checkstack(m, 3) == 0 || raw.push_value(v).is_err() {
                    ffi::lua_pushnil(state);
                } else if m != state {
                    ffi::lua_xmove(m, state, 1);
                }
            }),
        }
    }
}

/// The protected half of [`deliver`]: arguments `params` (a light userdata), and with `keep`
/// the memo, the key, the list of kept answers and that of answers kept across runs; leaves
/// the value.
unsafe extern "C-unwind" fn build(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by `deliver` only, under `lua_pcall`, with its parameters alive; at least
    // 20 free slots. Every value below is borrowed: nothing is left to drop if a call raises.
    unsafe {
        let keep = ffi::lua_gettop(state) == 5;
        let b = &*(ffi::lua_touserdata(state, 1) as *const Build);
        let lua = b.lua;
        // Whether the answer may be kept across runs: brought up to date in place at the
        // start of each (see `refresh`).
        let mut lasting = false;
        match b.payload {
            Payload::Nil => ffi::lua_pushnil(state),
            Payload::Value(v) => {
                lasting = matches!(v, Value::Boolean(_) | Value::Integer(_) | Value::Number(_));
                push_value(lua, state, v)
            }
            Payload::Text(t) => {
                lasting = true;
                ffi::lua_pushlstring(state, t.as_ptr().cast(), t.len());
            }
            Payload::Table(v) => {
                match b.state {
                    Some(name) => {
                        registry(state, &b.views.state_view);
                        push_value(lua, state, v);
                        registry(state, name);
                        ffi::lua_call(state, 2, 1);
                    }
                    None => {
                        registry(state, &b.views.freeze);
                        push_value(lua, state, v);
                        ffi::lua_call(state, 1, 1);
                    }
                };
            }
            Payload::Record(n, keys, values) => match b.shapes.known.get(n) {
                None => ffi::lua_pushnil(state),
                Some((_, shape)) => {
                    let bit = if b.reuse && n < 64 { 1u64 << n } else { 0 };
                    let cache = match &b.shapes.cache {
                        Some(cache)
                            if bit != 0 && b.shapes.lent.load(Ordering::Relaxed) & bit == 0 =>
                        {
                            Some(cache)
                        }
                        _ => None,
                    };
                    if let Some(cache) = cache {
                        let top = ffi::lua_gettop(state);
                        let at = 2 * n as ffi::lua_Integer + 1;
                        // top + 1: the cache; + 2: the shape's values, then its view.
                        registry(state, cache);
                        if ffi::lua_rawgeti(state, top + 1, at + 1) == ffi::LUA_TUSERDATA {
                            // Refilled: no script can reach it since its last run (`run.rs`).
                            lasting = true;
                            b.shapes.lent.fetch_or(bit, Ordering::Relaxed);
                            fill(lua, state, b.views, keys.len(), values);
                            ffi::lua_rawgeti(state, top + 1, at);
                            ffi::lua_copy(state, -1, top + 1);
                        } else {
                            ffi::lua_settop(state, top);
                            new_record(lua, state, b.views, shape, keys.len(), values);
                            // Kept for the next runs, and handed to this one.
                            lasting = true;
                            b.shapes.lent.fetch_or(bit, Ordering::Relaxed);
                            registry(state, cache);
                            ffi::lua_pushvalue(state, top + 1);
                            ffi::lua_rawseti(state, top + 2, at);
                            ffi::lua_rawgetp(state, top + 1, record_key());
                            ffi::lua_rawseti(state, top + 2, at + 1);
                        }
                        ffi::lua_settop(state, top + 1);
                    } else {
                        new_record(lua, state, b.views, shape, values.len(), values);
                    }
                }
            },
        }
        if keep {
            // list[at], list[at + 1] = memo, key, in the list of kept answers (4) or in that
            // of answers kept across runs (5); then memo[key] = value. In that order: should a
            // write raise (out of memory), no answer is in the memo without its entry in a list
            // (an entry without its answer is harmless: letting it go sets a nil to nil).
            let (list, at) = if lasting && b.persist != 0 {
                (5, b.persist)
            } else {
                (4, b.at)
            };
            ffi::lua_pushvalue(state, 2);
            ffi::lua_rawseti(state, list, at);
            ffi::lua_pushvalue(state, 3);
            ffi::lua_rawseti(state, list, at + 1);
            ffi::lua_pushvalue(state, 3);
            ffi::lua_pushvalue(state, -2);
            ffi::lua_rawset(state, 2);
            // Only once nothing can raise any more.
            b.persisted.set(list == 5);
        }
        1
    }
}

/// Brings the answer kept across runs that `r` names up to date with the host's `payload`, in
/// place, without calling anything that may raise: a record's view refilled where its values
/// changed, when they are numbers, booleans or nil; the same text left as it is; a number or
/// boolean set again in the memo. False when it cannot be (another kind or shape, other text,
/// values that would need converting): the caller lets it go, and the next read asks the host.
///
/// # Safety
/// `stack` holds the list of answers kept across runs at `r.list`, with room for 4 values; the
/// runtime's lock is held and no Lua code runs on it.
unsafe fn refresh(
    stack: *mut ffi::lua_State,
    shapes: &Shapes,
    r: &mut Refresh<'_>,
    payload: Payload<'_>,
) -> bool {
    // SAFETY: reading tables, pushing plain values and setting a userdata's existing user
    // values or a table's existing key neither allocate nor raise.
    unsafe {
        let top = ffi::lua_gettop(stack);
        // top + 1: the memo; top + 2: the key.
        let memo_and_key = || {
            ffi::lua_rawgeti(stack, r.list, r.at);
            ffi::lua_rawgeti(stack, r.list, r.at + 1);
        };
        match (&mut *r.kind, payload) {
            (Kind::Text(kept), Payload::Text(t)) => **kept == *t,
            (Kind::Scalar, Payload::Value(v))
                if matches!(v, Value::Boolean(_) | Value::Integer(_) | Value::Number(_)) =>
            {
                memo_and_key();
                ffi::lua_pushvalue(stack, top + 2);
                let present = ffi::lua_rawget(stack, top + 1) != ffi::LUA_TNIL;
                ffi::lua_settop(stack, top + 2);
                if present {
                    ffi::lua_pushvalue(stack, top + 2);
                    push_plain(stack, v);
                    ffi::lua_rawset(stack, top + 1);
                }
                ffi::lua_settop(stack, top);
                present
            }
            (Kind::Record(n, held), Payload::Record(m, keys, values))
                if *n == m && m < 64 && values.iter().all(plain) =>
            {
                let count = keys.len().min(usize::from(u16::MAX) - 1);
                let nil = Value::Nil;
                // One pass: each place whose value changed is set in the view (found at the
                // first) and noted in `held`; with nothing held of this length, every place.
                let all = !matches!(held, Some(h) if h.len() == values.len());
                if all {
                    *held = Some(values.iter().map(Plain::or_nil).collect());
                }
                let mut found = false;
                let mut fresh = true;
                for i in 0..count {
                    let v = values.get(i).unwrap_or(&nil);
                    if !all {
                        let now = Plain::or_nil(v);
                        match held.as_mut().and_then(|h| h.get_mut(i)) {
                            Some(was) if *was != now => *was = now,
                            // The same, or past the values (nil, as it was).
                            _ => continue,
                        }
                    }
                    if !found {
                        found = true;
                        memo_and_key();
                        fresh = ffi::lua_rawget(stack, top + 1) == ffi::LUA_TTABLE
                            && ffi::lua_rawgetp(stack, -1, record_key()) == ffi::LUA_TUSERDATA;
                        if !fresh {
                            break;
                        }
                    }
                    push_plain(stack, v);
                    ffi::lua_setiuservalue(stack, -2, i as c_int + 2);
                }
                if found {
                    ffi::lua_settop(stack, top);
                }
                if fresh {
                    // The run is handed the view (scripts cannot change it): whether a script
                    // can reach it when the run ends is checked then (`run.rs`).
                    shapes.lent.fetch_or(1 << m, Ordering::Relaxed);
                } else {
                    *held = None;
                }
                fresh
            }
            _ => false,
        }
    }
}

/// A plain value (see [`plain`]) as a record's view kept across runs last held it: copied and
/// compared without touching an mlua `Value` (whose clone and drop cost a match each). Equal
/// when the same value of the same type (an integer is not the float of the same number:
/// `math.type` tells them apart; a float is compared by its bits).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Plain {
    Nil,
    Boolean(bool),
    Integer(ffi::lua_Integer),
    Number(u64),
}

impl Plain {
    /// `v`, if it is plain.
    fn of(v: &Value) -> Option<Plain> {
        match *v {
            Value::Nil => Some(Plain::Nil),
            Value::Boolean(b) => Some(Plain::Boolean(b)),
            Value::Integer(n) => Some(Plain::Integer(n)),
            Value::Number(x) => Some(Plain::Number(x.to_bits())),
            _ => None,
        }
    }

    /// `v`, known to be plain (anything else as nil).
    fn or_nil(v: &Value) -> Plain {
        Plain::of(v).unwrap_or(Plain::Nil)
    }
}

/// Whether `v` is a value pushed without converting anything (which cannot raise).
fn plain(v: &Value) -> bool {
    matches!(
        v,
        Value::Nil | Value::Boolean(_) | Value::Integer(_) | Value::Number(_)
    )
}

/// Pushes a number, a boolean or nil (anything else as nil).
///
/// # Safety
/// `state` has a free slot.
unsafe fn push_plain(state: *mut ffi::lua_State, v: &Value) {
    unsafe {
        match *v {
            Value::Boolean(b) => ffi::lua_pushboolean(state, c_int::from(b)),
            Value::Integer(n) => ffi::lua_pushinteger(state, n),
            Value::Number(x) => ffi::lua_pushnumber(state, x),
            _ => ffi::lua_pushnil(state),
        }
    }
}

/// Pushes a new record: its view and a userdata with room for `room` values (at least
/// `values.len()`), its user values the shape then each field's.
///
/// # Safety
/// As `build`'s body: under `lua_pcall`, with room, nothing to drop if a call raises.
unsafe fn new_record(
    lua: &Lua,
    state: *mut ffi::lua_State,
    views: &Views,
    shape: &RegistryKey,
    room: usize,
    values: &[Value],
) {
    unsafe {
        // The values: a userdata, its user values the shape then each field's (a table made a
        // view), set without hashing.
        let room = room.max(values.len()).min(usize::from(u16::MAX) - 1);
        ffi::lua_newuserdatauv(state, 0, room as c_int + 1);
        registry(state, shape);
        ffi::lua_setiuservalue(state, -2, 1);
        fill(lua, state, views, room, values);
        // The view, holding them.
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_pushlightuserdata(state, record_key());
        ffi::lua_rotate(state, -3, -1);
        ffi::lua_rawset(state, -3);
        registry(state, &views.record);
        ffi::lua_setmetatable(state, -2);
    }
}

/// Sets the user values 2 to `count + 1` of the record's userdata on top of `state` to
/// `values` (a table made a view), nil past them: a refilled view shows nothing of the run
/// that had it before. A place the userdata lacks is skipped (`lua_setiuservalue` pops).
///
/// # Safety
/// As `build`'s body: under `lua_pcall`, with room, nothing to drop if a call raises.
unsafe fn fill(
    lua: &Lua,
    state: *mut ffi::lua_State,
    views: &Views,
    count: usize,
    values: &[Value],
) {
    unsafe {
        let count = count.min(usize::from(u16::MAX) - 1);
        for i in 0..count {
            match values.get(i) {
                Some(v @ Value::Table(_)) => {
                    registry(state, &views.freeze);
                    push_value(lua, state, v);
                    ffi::lua_call(state, 1, 1);
                }
                Some(v) => push_value(lua, state, v),
                None => ffi::lua_pushnil(state),
            }
            ffi::lua_setiuservalue(state, -2, i as c_int + 2);
        }
    }
}

fn is_identifier(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}
