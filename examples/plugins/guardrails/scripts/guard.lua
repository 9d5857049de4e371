-- The guardrails' guard of file tools (`Write`, `Edit`, `apply_patch`...): asks before a file outside the
-- project folder is written. (Shell commands are judged by Warden itself: `tool.shell`.)
--
-- The path is made absolute against the project's folder (`context.project.root`), with `.`,
-- `..` and `~` read as a shell reads them. Warden's own files are refused outright by
-- `protect-warden-files`: this guard leaves them to it.

local root = context.project.root

-- `path` absolute and normalized, or nil when there is no folder to read it against.
local function absolute(path)
  if path:sub(1, 1) == "~" then
    return path -- the home folder: outside the project
  elseif path:sub(1, 1) ~= "/" then
    if root == "" then
      return nil
    end
    path = root .. "/" .. path
  end
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." then
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return "/" .. table.concat(parts, "/")
end

local function under(path, dir)
  return dir ~= "" and (path == dir or path:sub(1, #dir + 1) == dir .. "/")
end

-- The files the call writes: one path, or every file of a patch (Codex's `apply_patch`,
-- whose input Warden gives `warden_writes`: Warden's own field, which a model cannot set).
local args = tool.arguments
if type(args) ~= "table" then
  return false
end
local paths = {}
if type(args.warden_writes) == "table" then
  for _, p in ipairs(args.warden_writes) do
    paths[#paths + 1] = p
  end
else
  paths[1] = args.file_path or args.path or args.notebook_path
end
for _, path in ipairs(paths) do
  local full = type(path) == "string" and path ~= "" and absolute(path) or nil
  if full ~= nil and not (root ~= "" and under(full, root))
      and not (full:find("/%.claude/settings[%w.]*%.json$") or full:find("/%.warden/")
        or full:find("/%.codex/hooks%.json$") or full:find("/%.codex/config%.toml$")
        or full:find("/%.gemini/settings%.json$")) then
    -- (Warden's own files and the agents' hook files are refused by protect-warden-files.)
    return ask("this writes `" .. full .. "`, outside the project folder: is that what you want?")
  end
end
return false
