-- The sandbox, built once per Lua state. This chunk runs with the real globals as _ENV and
-- receives `host`, a table of Rust functions. Scripts never see the real globals: each runs
-- with its own environment, whose missing names are looked up in `base`, the table built here.
-- Everything a script can reach is either its own or read-only.

local host = ...

local type, error, select, next, ipairs, pairs = type, error, select, next, ipairs, pairs
local tostring, tonumber, assert = tostring, tonumber, assert
local rawget, rawset, rawequal, rawlen = rawget, rawset, rawequal, rawlen
local setmetatable, getmetatable = setmetatable, getmetatable
local real_pcall, real_xpcall, real_load, real_collect = pcall, xpcall, load, collectgarbage
local co_yield, co_resume, co_close = coroutine.yield, coroutine.resume, coroutine.close
local co_running = coroutine.running
local os_time, os_clock = os.time, os.clock
local tripped, handler, effect = host.tripped, host.handler, host.effect
-- Values that differ from one run to the next (the clock, the memory count) go through `input`,
-- which records them, and answers them from the record when a waiting script is replayed in
-- another process.
local input = host.input

local MARK = "read-only"
local WAIT = "__warden_wait__"

---------------------------------------------------------------------------------------------
-- Read-only views: a view is an empty table whose reads go to the real table and whose
-- writes fail. Two kinds: the libraries (`lock`), whose real tables must stay out of reach,
-- and the data a run reads (`freeze`), whose real tables are fresh copies made for that read.

local function read_only(_, k)
  error("this table is read-only: cannot set `" .. tostring(k) .. "`", 2)
end

local locked = {} -- library view -> real table (for the life of the state)

-- Each view's metatable points `__index` at the real table itself, so a read such as
-- `string.format` is one table lookup, not a function call. The metatable is protected
-- (`getmetatable` answers MARK), the view holds nothing (`rawget` finds nothing), and writes
-- fail: the real table stays out of reach.
local function lock(t)
  local p = setmetatable({}, { __metatable = MARK, __newindex = read_only, __index = t })
  locked[p] = t
  return p
end

-- A data view keeps its real table under a private key (a light userdata the host made, which
-- no script can make or name). A script that digs it out with `next` only reaches its own copy
-- of what it read.
local REAL = host.real
local RO = { __metatable = MARK, __newindex = read_only }

local function freeze(v)
  if type(v) ~= "table" or getmetatable(v) == MARK then
    return v
  end
  return setmetatable({ [REAL] = v }, RO)
end

RO.__index = function(p, k)
  -- `p[REAL]` is present in the view itself: a plain read, no metamethod.
  local v = p[REAL][k]
  if type(v) == "table" then
    return freeze(v)
  end
  return v
end
RO.__len = function(p)
  return #p[REAL]
end

-- Views of data are walked in a fixed order (numbers, then strings, each ascending; other keys
-- after them in the order Lua gives), the same in every Lua state: a script that iterates
-- Warden's data acts the same when it is replayed in another process. A view's real table
-- never changes, so its order is computed once.
local order_of = setmetatable({}, { __mode = "k" })
local function rank(k)
  local t = type(k)
  if t == "number" then
    return 1
  elseif t == "string" then
    return 2
  end
  return 3
end
local function before(a, b)
  local ra, rb = rank(a), rank(b)
  if ra ~= rb then
    return ra < rb
  end
  if ra == 3 then
    return false
  end
  return a < b
end
local function order(t)
  local o = order_of[t]
  if o then
    return o
  end
  local keys = {}
  for k in next, t do
    keys[#keys + 1] = k
  end
  table.sort(keys, before)
  local at = {}
  for i, k in ipairs(keys) do
    at[k] = i
  end
  o = { keys = keys, at = at }
  order_of[t] = o
  return o
end
local function ordered_next(t, k)
  local o = order(t)
  local i = 1
  if k ~= nil then
    i = (o.at[k] or #o.keys) + 1
  end
  local nk = o.keys[i]
  if nk == nil then
    return nil
  end
  return nk, freeze(t[nk])
end
RO.__pairs = function(p)
  local t = p[REAL]
  return function(_, k)
    return ordered_next(t, k)
  end, p, nil
end

-- Records (a few named values the host hands out, such as `context.turn`) are views the host
-- builds as { [REC] = U } with RECORD as metatable, where U is a userdata (no metatable: a
-- script that digs it out with `next` can do nothing with it) whose user values are SHAPE
-- then the values, in the order of the shape's fields (set without hashing a field), and
-- SHAPE (one per shape, from `shape`) maps each field to its place. RECORD's `__index` is a C
-- function of the host: a read is a few lookups, no Lua call; `record_at(view, i)` reads user
-- value i (1: the shape). A misspelt field calls the shape's MISS, which raises at the script
-- that read it (level 3, past `__index`). Records walk in the order of their sorted field
-- names, like views of data.
local REC, MISS, record_at = host.record_key, host.miss_key, host.record_at
local ORDER, RANK = {}, {}

local function record_next(p, k)
  local shape = record_at(p, 1)
  local order = shape[ORDER]
  local i = 1
  if k ~= nil then
    i = (shape[RANK][k] or #order) + 1
  end
  while true do
    local name = order[i]
    if name == nil then
      return nil
    end
    local v = record_at(p, shape[name])
    if v ~= nil then
      return name, v
    end
    i = i + 1
  end
end

local RECORD = {
  __metatable = MARK,
  __newindex = read_only,
  __index = host.record_index,
  __len = function()
    return 0
  end,
  __pairs = function(p)
    return function(_, k)
      return record_next(p, k)
    end, p, nil
  end,
}

local function shape(list, ...)
  local s, order, rank = {}, { ... }, {}
  for i, name in ipairs(order) do
    s[name] = i + 1
  end
  table.sort(order)
  for i, name in ipairs(order) do
    rank[name] = i
  end
  s[ORDER], s[RANK] = order, rank
  s[MISS] = function(k)
    error("no field `" .. tostring(k) .. "` in this record; its fields are " .. list, 3)
  end
  return s
end

-- `next` over a view walks what the view shows (its real table, values frozen, in the order
-- `pairs` uses), never the view's private key.
local function safe_next(t, k)
  if type(t) == "table" then
    local real = rawget(t, REAL)
    if real then
      return ordered_next(real, k)
    end
    if rawget(t, REC) then
      return record_next(t, k)
    end
    real = locked[t]
    if real then
      local nk, nv = next(real, k)
      return nk, freeze(nv)
    end
  end
  return next(t, k)
end

-- A plain deep copy of a value that may hold frozen tables, to hand to the host.
local function thaw(v, depth)
  if type(v) ~= "table" then
    return v
  end
  depth = (depth or 0) + 1
  if depth > 32 then
    error("the value is nested more than 32 levels deep (or refers to itself)", 3)
  end
  local out = {}
  if rawget(v, REC) then
    local shape = record_at(v, 1)
    for _, name in ipairs(shape[ORDER]) do
      out[name] = thaw(record_at(v, shape[name]), depth)
    end
    return out
  end
  local t = rawget(v, REAL) or locked[v] or v
  for k, x in next, t do
    out[thaw(k, depth)] = thaw(x, depth)
  end
  return out
end

---------------------------------------------------------------------------------------------
-- Limits: once a run is over its time (or memory), every protected call re-raises, so a
-- script cannot catch its way past a limit.

local function reraise(ok, ...)
  if not ok and (tripped() or (...) == "not enough memory") then
    error((...), 0)
  end
  return ok, ...
end

local function safe_pcall(f, ...)
  return reraise(real_pcall(f, ...))
end

local function safe_xpcall(f, h, ...)
  -- An error raised by the time limit leaves hooks off while the message handler runs (Lua
  -- restores them only when the error reaches the protected call), so past a limit the
  -- script's handler is not called at all.
  return reraise(real_xpcall(f, function(e)
    if tripped() then
      return e
    end
    return h(e)
  end, ...))
end

local CO = {}
for k, v in next, coroutine do
  CO[k] = v
end
CO.resume = function(co, ...)
  return reraise(co_resume(co, ...))
end
CO.close = function(co)
  return reraise(co_close(co))
end

---------------------------------------------------------------------------------------------
-- Library functions that could escape or stall the sandbox, made safe.

-- Lua's pattern matching runs in C, where the time limit cannot interrupt it: scripts match
-- with Warden's matcher instead, which counts its steps against the run's time (strings.rs).
local S = {}
for k, v in next, string do
  S[k] = v
end
S.dump = nil
-- `string.rep` loops in C once for each repetition, even when each adds nothing, and there the
-- time limit cannot stop it: `(''):rep(math.maxinteger)` ran for ages. An empty string repeated
-- with an empty separator is empty whatever the count: it is answered without the loop, for a
-- count the library would take (an integer, or a number or string that is one).
local rep, tointeger = string.rep, math.tointeger
S.rep = function(s, n, sep)
  if s == "" and (sep == nil or sep == "") and tointeger(n) then
    return ""
  end
  return rep(s, n, sep)
end
local strings = host.strings
S.find, S.match, S.gmatch, S.gsub = strings.find, strings.match, strings.gmatch, strings.gsub
-- In the real library too, where Lua looks for a function's name for its error messages.
string.find, string.match, string.gmatch, string.gsub = S.find, S.match, S.gmatch, S.gsub
local s_find = S.find
-- Method calls on strings (`s:find(...)`) go through the same functions; the shared string
-- metatable is then locked, so no script can change what strings do for the others.
local string_mt = getmetatable("")
string_mt.__index = S
string_mt.__metatable = "the string metatable is protected"

-- table.move loops in C over the range it is given, even an empty one: a billion keys would
-- run past any time limit. Large moves are made in pieces, between which the limit is checked,
-- in the order (and with the checks) of Lua's own.
local T = {}
for k, v in next, table do
  T[k] = v
end
local t_move, tointeger, maxinteger = table.move, math.tointeger, math.maxinteger
local MOVE_PIECE = 4096
T.move = function(a1, f, e, t, a2)
  local fi, ei, ti = tointeger(f), tointeger(e), tointeger(t)
  if not (fi and ei and ti) or ei - fi < MOVE_PIECE then
    return t_move(a1, f, e, t, a2)
  end
  t_move(a1, 1, 0, 1, a2) -- the checks of the tables
  if not (fi > 0 or ei < maxinteger + fi) then
    error("bad argument #3 to 'move' (too many elements to move)", 2)
  end
  local n = ei - fi + 1
  if ti > maxinteger - n + 1 then
    error("bad argument #4 to 'move' (destination wrap around)", 2)
  end
  local dest = a2
  if dest == nil then
    dest = a1
  end
  if ti > ei or ti <= fi or (a2 ~= nil and a1 ~= a2) then
    for lo = 0, n - 1, MOVE_PIECE do
      local hi = lo + MOVE_PIECE - 1
      if hi > n - 1 then
        hi = n - 1
      end
      t_move(a1, fi + lo, fi + hi, ti + lo, dest)
    end
  else
    for hi = n - 1, 0, -MOVE_PIECE do
      local lo = hi - MOVE_PIECE + 1
      if lo < 0 then
        lo = 0
      end
      t_move(a1, fi + lo, fi + hi, ti + lo, dest)
    end
  end
  return dest
end

-- Finalizers run with hooks off, and so can closers of a coroutine stopped by the time limit:
-- both would be out of reach of the limit. So a metatable a script gives may have no `__gc`
-- nor `__close`, and none added later either (Lua reads them off the metatable when an object
-- becomes closable, and when it is closed): a table in use as a metatable is guarded. Its own
-- metatable becomes a guard whose `__newindex` refuses the two names (a guard `getmetatable`
-- cannot reach: it answers the table's former metatable, if it had one, a class that inherits
-- keeping its metamethods as they were then, else nil), and `rawset` refuses them everywhere.
-- A table whose metatable is protected (it says so with `__metatable`) cannot be guarded, and
-- is refused as a metatable, but for a library's read-only view.
local IN_USE = "in use as a metatable"
local guarded = setmetatable({}, { __mode = "k" })

local HANDLERS = { __close = true, __gc = true }

local function refuse_handlers(k)
  if HANDLERS[k] then
    error("this table is in use as a metatable: __close handlers and __gc finalizers are not allowed in scripts", 3)
  end
end

local GUARD = {
  __metatable = IN_USE,
  __newindex = function(m, k, v)
    refuse_handlers(k)
    rawset(m, k, v)
  end,
}

local function guard(mt)
  if guarded[mt] or locked[mt] then
    -- Guarded already, or a library's read-only view (which holds no field, and takes none).
    return
  end
  local m = getmetatable(mt)
  if m == nil then
    setmetatable(mt, GUARD)
  elseif type(m) == "table" then
    local g = { __metatable = m }
    for k, v in next, m do
      if k ~= "__metatable" and not HANDLERS[k] then
        g[k] = v
      end
    end
    local inner = rawget(m, "__newindex")
    g.__newindex = function(t, k, v)
      refuse_handlers(k)
      if inner == nil then
        rawset(t, k, v)
      elseif type(inner) == "function" then
        inner(t, k, v)
      else
        inner[k] = v
      end
    end
    setmetatable(mt, g)
  else
    -- A metatable that says it is protected cannot be guarded: a script's own (its
    -- `__metatable` set), the script's globals, Warden's data.
    error("setmetatable: a table whose metatable is protected cannot be used as a metatable in scripts", 3)
  end
  guarded[mt] = true
end

local function safe_setmetatable(t, mt)
  if guarded[t] then
    error("setmetatable: this table is in use as a metatable, and keeps the metatable it had then; give it its own metatable before using it as one", 2)
  end
  if type(t) == "table" and getmetatable(t) ~= nil and type(getmetatable(t)) ~= "table" then
    error("setmetatable: this table's metatable is protected (Warden's data and libraries are read-only)", 2)
  end
  if type(t) == "table" and type(mt) == "table" then
    if rawget(mt, "__gc") ~= nil then
      error("setmetatable: __gc finalizers are not allowed in scripts", 2)
    end
    if rawget(mt, "__close") ~= nil then
      error("setmetatable: __close handlers are not allowed in scripts", 2)
    end
    if t == mt then
      error("setmetatable: a table cannot be its own metatable in scripts (give it a metatable of its own)", 2)
    end
    guard(mt)
  end
  return setmetatable(t, mt)
end

-- What a guard answers is not the script's: a table in use as a metatable that had none
-- still has none (a walk up a class's metatables ends there).
local function safe_getmetatable(t)
  local m = getmetatable(t)
  if m == IN_USE and guarded[t] then
    return nil
  end
  return m
end

local function safe_rawset(t, k, v)
  if getmetatable(t) == MARK then
    error("rawset: this table is read-only", 2)
  end
  if HANDLERS[k] then
    error("rawset: __close handlers and __gc finalizers are not allowed in scripts", 2)
  end
  return rawset(t, k, v)
end

local function safe_collectgarbage(opt)
  if opt == nil or opt == "count" then
    return input("memory", real_collect("count"))
  end
  error('collectgarbage: scripts may only ask for "count"', 2)
end

-- `math.random` draws from the running script's own generator, seeded when it starts, so a
-- replay draws the same numbers (and one script's draws never change another's).
local M = {}
for k, v in next, math do
  M[k] = v
end
M.random = host.random
M.randomseed = host.randomseed

local base = {}

local function new_env()
  local env = setmetatable({}, { __index = base, __metatable = "sandbox" })
  rawset(env, "_G", env)
  return env
end

-- Compiling runs in C, out of reach of the time limit: its time grows with the chunk's length.
local MAX_CHUNK = 1 << 20

local function safe_load(chunk, name, mode, env)
  if type(chunk) ~= "string" then
    error("load: scripts can only load source text", 2)
  end
  if #chunk > MAX_CHUNK then
    error("load: the chunk is " .. #chunk .. " bytes long; scripts can load at most 1 MiB at once", 2)
  end
  if mode ~= nil and mode ~= "t" then
    error("load: binary chunks are not allowed", 2)
  end
  return real_load(chunk, name, "t", env or new_env())
end

---------------------------------------------------------------------------------------------
-- The frame of a run: `context`, `event`, `tool`, `result`, `settings`, read lazily from the host.

local fetch, result_of, has_tool = host.fetch, host.result, host.has_tool

local function state_view(real, name)
  local get = function(k, default)
    local v = real[k]
    if v == nil then
      return default
    end
    return freeze(v)
  end
  return setmetatable({}, {
    __index = function(_, k)
      if k == "get" then
        return get
      end
      return freeze(real[k])
    end,
    __newindex = function(_, k)
      local how = name == "session_state" and "set_state(key, value, 'session')" or "set_state(key, value)"
      error("context." .. name .. " is read-only: cannot set `" .. tostring(k) .. "`; use " .. how, 2)
    end,
    __pairs = function()
      return function(_, k)
        return ordered_next(real, k)
      end, nil, nil
    end,
    __metatable = MARK,
  })
end

host.views(RECORD, freeze, state_view, shape)

-- Each root is an empty table whose reads go to its memo: what the run has read of it so far.
-- A field the memo lacks is asked of the host (`fetch` is the memo's `__index`), whose answer
-- holds for the whole run (the host serves one frozen frame per tick) and which it keeps in
-- the memo, so a field read again costs a table lookup. The host empties the memos when the
-- run ends (waiting or not), so a run never sees what another read, except a few answers (a
-- record no script can reach once its run ends, a text, a number, a boolean) that it keeps
-- from run to run and brings up to date with each run's tick before the script runs
-- (`fetch.rs`); a run that records or replays what it reads (a durable session's waiting
-- script) keeps nothing, asking the host at every read as its record expects. Values taken
-- out of a root keep the tick they were read in.
local root_name = {}
local ROOT_SET = function(p, k)
  error("`" .. root_name[p] .. "` is read-only: cannot set `" .. tostring(k) .. "`", 2)
end
local ROOT_PAIRS = function(p)
  error("`" .. root_name[p] .. "` cannot be iterated; read its fields by name", 2)
end

-- The roots, in the order the host knows their memos.
local roots, memos = {}, {}
for i, name in ipairs({ "context", "event", "tool", "result", "settings" }) do
  local memo = setmetatable({}, { __index = fetch })
  local p = setmetatable({}, {
    __index = memo,
    __newindex = ROOT_SET,
    __pairs = ROOT_PAIRS,
    __metatable = MARK,
  })
  root_name[p] = name
  roots[name] = p
  memos[i] = memo
end

-- `tool` and `result` exist only when the tick has them; `context` and `event` always do.
rawset(base, "context", roots.context)
rawset(base, "event", roots.event)
rawset(base, "settings", roots.settings)
setmetatable(base, {
  __index = function(_, k)
    if k == "tool" then
      return has_tool() and roots.tool or nil
    elseif k == "result" then
      local lazy, value = result_of()
      if lazy then
        return roots.result
      end
      return freeze(value)
    end
  end,
})

---------------------------------------------------------------------------------------------
-- The Warden API: actions, waiting, and the helpers of the condition language.

local function text(v, what)
  local t = type(v)
  if t == "string" or t == "number" then
    return tostring(v)
  end
  error(what .. " must be a string, not a " .. t, 3)
end

local function notify(message, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("notify(message, options): options must be a table such as { priority = 'high' }", 2)
  end
  effect("notify", text(message, "notify: the message"), thaw(opts))
end

local function log(message, level)
  if level ~= nil and type(level) ~= "string" then
    error("log(message, level): level must be a string such as 'info'", 2)
  end
  effect("log", text(message, "log: the message"), level)
end

local function set_state(key, value, scope)
  local kind
  if scope == nil or scope == "shared" then
    kind = "set_state"
  elseif scope == "session" then
    kind = "set_session_state"
  else
    error("set_state(key, value, scope): scope must be 'shared' (the default) or 'session', not " .. tostring(scope), 2)
  end
  effect(kind, text(key, "set_state: the key"), thaw(value))
end

local function emit_event(event_type, payload)
  if payload ~= nil and type(payload) ~= "table" then
    error("emit_event(type, payload): payload must be a table", 2)
  end
  effect("emit_event", text(event_type, "emit_event: the event type"), thaw(payload))
end

-- Decisions return true, so that `return deny("...")` both decides and makes the condition
-- hold (the rule fires).
local function decide(decision, reason)
  if reason == nil then
    reason = ""
  end
  effect("decide", text(decision, "decide: the decision"), text(reason, "decide: the reason"))
  return true
end

local function rewrite(set)
  if type(set) ~= "table" then
    error("rewrite(arguments): give a table of the arguments to set, such as { limit = 50 }", 2)
  end
  effect("rewrite", "arguments", thaw(set))
  return true
end

local function turn_number()
  return base.context.turn.number
end

-- The coroutines Warden runs scripts in. Waiting means yielding to Warden, which only these
-- can do: inside a coroutine the script made, a yield would go back to the script instead.
local task_threads = setmetatable({}, { __mode = "k" })
local function check_waitable(name)
  if not task_threads[co_running()] then
    error(name .. " cannot wait inside a coroutine the script created; call it from the script's own code", 3)
  end
end

local function wait_turns(n)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 then
    error("wait_turns(n): n must be a whole number from 1", 2)
  end
  check_waitable("wait_turns")
  local target = turn_number() + n
  repeat
    co_yield(WAIT, "on_turn_start")
  until turn_number() >= target
end

local function matches(filter, ev)
  if filter == nil then
    return true
  end
  if type(filter) == "function" then
    return filter(ev) and true or false
  end
  for k, want in pairs(filter) do
    local have
    if k == "tool" then
      have = ev.tool_name
    else
      have = ev[k]
    end
    if type(want) == "table" then
      local any = false
      for _, w in ipairs(want) do
        if w == have then
          any = true
        end
      end
      if not any then
        return false
      end
    elseif want ~= have then
      return false
    end
  end
  return true
end

local EVENT_FIELDS = { "hook", "tool_name", "query", "message", "error", "data", "time" }

local function wait_for(hook, filter)
  if not host.is_hook(hook) then
    error("wait_for(hook): `" .. tostring(hook) .. "` is not a hook; use on_query_start, on_turn_start, on_turn_end, on_tool_call, on_tool_complete, on_tool_failure or on_session_end", 2)
  end
  local t = type(filter)
  if filter ~= nil and t ~= "table" and t ~= "function" then
    error("wait_for(hook, filter): the filter must be a table such as { tool = 'vault_search' } or a function", 2)
  end
  check_waitable("wait_for")
  while true do
    co_yield(WAIT, hook)
    local ev = base.event
    if ev.hook == hook and matches(filter, ev) then
      -- A copy of this event: `event` itself always shows the current one.
      local copy = {}
      for _, k in ipairs(EVENT_FIELDS) do
        copy[k] = ev[k]
      end
      return freeze(copy)
    end
  end
end

local function failure_count(name)
  return base.context.history.failures[name] or 0
end

local function tool_calls(name)
  return base.context.history.calls[name] or 0
end

---------------------------------------------------------------------------------------------
-- The script-visible globals.

local function fill(t)
  for k, v in next, t do
    base[k] = v
  end
end

fill({
  assert = assert, error = error, ipairs = ipairs, next = safe_next, pairs = pairs, select = select,
  tonumber = tonumber, tostring = tostring, type = type,
  rawequal = rawequal, rawget = rawget, rawlen = rawlen, rawset = safe_rawset,
  getmetatable = safe_getmetatable, setmetatable = safe_setmetatable,
  pcall = safe_pcall, xpcall = safe_xpcall, load = safe_load, collectgarbage = safe_collectgarbage,
  print = function(...)
    local parts = {}
    for i = 1, select("#", ...) do
      parts[i] = tostring((select(i, ...)))
    end
    effect("log", table.concat(parts, "\t"), "debug")
  end,
  _VERSION = _VERSION,
  string = lock(S),
  table = lock(T),
  math = lock(M),
  utf8 = lock(utf8),
  coroutine = lock(CO),
  os = lock({
    time = function(t)
      return input("time", os_time(t))
    end,
    clock = function()
      return input("clock", os_clock())
    end,
  }),
  notify = notify,
  log = log,
  set_state = set_state,
  emit_event = emit_event,
  decide = decide,
  allow = function(reason) return decide("allow", reason) end,
  ask = function(reason) return decide("ask", reason) end,
  deny = function(reason) return decide("deny", reason) end,
  stop = function(reason) return decide("stop", reason) end,
  rewrite = rewrite,
  wait_turns = wait_turns,
  wait_for = wait_for,
  failure_count = failure_count,
  tool_calls = tool_calls,
  tool_completed = function(name)
    local ev = base.event
    return ev.hook == "on_tool_complete" and ev.tool_name == name
  end,
  tool_failed = function(name)
    local ev = base.event
    return ev.hook == "on_tool_failure" and ev.tool_name == name
  end,
  context_above_threshold = function(t)
    return base.context.turn.token_usage >= t
  end,
  iterations_above_threshold = function(t)
    local turn = base.context.turn
    return turn.max_iterations > 0 and turn.iteration_count >= t * turn.max_iterations
  end,
  query_mentions = function(word)
    return s_find(string.lower(base.context.query), string.lower(word), 1, true) ~= nil
  end,
})

-- Every task runs `xpcall(script, handler)` as its coroutine's body: the handler turns any
-- error into text with a traceback, without calling a script's own __tostring from the host.
-- The host marks each coroutine it makes in `task_threads` (where waiting is allowed).
return {
  new_env = new_env,
  call = real_xpcall,
  memos = memos,
  task_threads = task_threads,
  wait_tag = WAIT,
  -- For the host's check of which names a script's source can reach (`straight_line`).
  base = base,
}
