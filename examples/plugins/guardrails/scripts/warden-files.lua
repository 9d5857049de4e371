-- The guardrails' guard of Warden itself, for file tools (`Write`, `Edit`...): refuses a write
-- to Warden's own files (`.warden/`: its configuration, rules and database; a `warden.toml`)
-- or to an agent's hook configuration (`.claude/settings.json` and the like, in the project
-- or the home folder), so that an agent cannot switch its supervisor off. (A shell command
-- that does the same is refused by `deny-destructive-shell`: `tool.shell.touches_warden`.)

local PROTECTED = {
  "/%.warden$", "/%.warden/", "/warden%.toml$",
  "/%.claude/settings%.json$", "/%.claude/settings%.local%.json$",
  "/%.codex/hooks%.json$", "/%.codex/config%.toml$", "/%.gemini/settings%.json$",
}

local args = tool.arguments
if type(args) ~= "table" then
  return false
end
-- One path, or every file of a patch (Codex's `apply_patch`, whose input Warden gives `warden_writes`: Warden's own field, which a model cannot set).
local paths = {}
if type(args.warden_writes) == "table" then
  for _, p in ipairs(args.warden_writes) do
    paths[#paths + 1] = p
  end
else
  paths[1] = args.file_path or args.path or args.notebook_path
end
for _, path in ipairs(paths) do
  if type(path) == "string" and path ~= "" then
    -- Read as a path: `a/./b` is `a/b`, and a relative path starts in the project.
    local full = "/" .. path:gsub("/%./", "/"):gsub("^%./", "")
    for _, pattern in ipairs(PROTECTED) do
      if full:find(pattern) then
        set_state("denials", context.session_state.get("denials", 0) + 1, "session")
        return deny("this changes `" .. path .. "`, Warden's own files or the agent's hook configuration: the supervisor is not the agent's to change; ask the user")
      end
    end
  end
end
return false
