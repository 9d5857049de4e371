-- The guardrails' guard of file tools (`Write`, `Edit`...): asks before a file outside the
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

local args = tool.arguments
if type(args) ~= "table" then
  return false
end
local path = args.file_path or args.path or args.notebook_path
if type(path) ~= "string" or path == "" then
  return false
end
local full = absolute(path)
if full == nil then
  return false
end
if root ~= "" and under(full, root) then
  return false
end
if full:find("/%.claude/settings[%w.]*%.json$") or full:find("/%.warden/") then
  return false -- protect-warden-files refuses it
end
return ask("this writes `" .. full .. "`, outside the project folder: is that what you want?")
