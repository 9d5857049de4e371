-- The guardrails' guard: reads a shell command as a shell splits it, or a file path, and
-- decides. Used by two rules: `deny-destructive-shell` (shell tools) and
-- `ask-write-outside-project` (file tools).
--
-- A shell command is split into words the way a shell does (quotes and backslashes removed),
-- then into simple commands at `;`, `&&`, `||`, `|`, `&` and new lines. In each, the words a
-- shell or a wrapper puts before the program (`sudo`, `env`, `VAR=value`, `command`, `exec`,
-- `nohup`, `time`, `doas`) are skipped. Then:
--   * `rm` with a recursive and a force flag (`-rf`, `-r -f`, `--recursive --force`...) and a
--     target outside the project (`/`, `~`, `$HOME`, `..`, an absolute path not under
--     `context.project.root`) is denied;
--   * `git push` forced (`--force`, `-f`, `--force-with-lease`, a `+` refspec) to main or
--     master is denied, and a forced push that names no branch is asked about;
--   * a script fetched with `curl` or `wget` and piped or substituted into a shell is denied.
--
-- What it cannot see (and no guard that reads the command can): a command hidden in a
-- variable, `eval`, an alias or a function, an encoded string (`base64 -d | sh`), a script
-- written to a file and run later, or another language (`python -c "shutil.rmtree('/')"`).
-- The book's Decisions chapter says more.

local SHELLS = { sh = true, bash = true, zsh = true, dash = true, ksh = true, fish = true }
local WRAPPERS = {
  sudo = true, doas = true, env = true, command = true, exec = true, nohup = true, time = true,
}

-- The words of a command line, and the separator before each simple command.
local function split(line)
  local commands, words, word = {}, {}, nil
  local sep = nil
  local i, n = 1, #line
  local function finish_word()
    if word then
      words[#words + 1] = word
      word = nil
    end
  end
  local function finish_command(next_sep)
    finish_word()
    if #words > 0 then
      commands[#commands + 1] = { words = words, sep = sep }
    end
    words, sep = {}, next_sep
  end
  while i <= n do
    local c = line:sub(i, i)
    if c == "'" then
      local close = line:find("'", i + 1, true) or (n + 1)
      word = (word or "") .. line:sub(i + 1, close - 1)
      i = close
    elseif c == '"' then
      local j, buf = i + 1, {}
      while j <= n and line:sub(j, j) ~= '"' do
        local d = line:sub(j, j)
        if d == "\\" and j < n then
          j = j + 1
          d = line:sub(j, j)
        end
        buf[#buf + 1] = d
        j = j + 1
      end
      word = (word or "") .. table.concat(buf)
      i = j
    elseif c == "\\" then
      word = (word or "") .. line:sub(i + 1, i + 1)
      i = i + 1
    elseif c == ";" or c == "\n" or c == "(" or c == ")" then
      finish_command(";")
    elseif c == "&" or c == "|" then
      local two = line:sub(i, i + 1)
      if two == "&&" or two == "||" then
        finish_command(two)
        i = i + 1
      else
        finish_command(c)
      end
    elseif c == " " or c == "\t" then
      finish_word()
    else
      word = (word or "") .. c
    end
    i = i + 1
  end
  finish_command(nil)
  return commands
end

-- The program of a simple command and the index of its first argument, past wrappers.
local function program(words)
  local i = 1
  while words[i] do
    local w = words[i]
    local base = w:match("([^/]+)$") or w
    if w:find("^[%a_][%w_]*=") then
      i = i + 1
    elseif WRAPPERS[base] then
      i = i + 1
      -- The wrapper's own options (`sudo -u root`, `env -i`).
      while words[i] and words[i]:sub(1, 1) == "-" do
        if words[i] == "-u" or words[i] == "-g" then
          i = i + 1
        end
        i = i + 1
      end
    else
      return base, i + 1
    end
  end
  return nil, i
end

local function under(path, root)
  return root ~= "" and (path == root or path:sub(1, #root + 1) == root .. "/")
end

-- Whether `path` leads out of the project.
local function outside(path, root)
  if path == "" then
    return false
  end
  if path:find("^~") or path:find("^%$HOME") or path:find("^%${HOME}") then
    return true
  end
  if path == ".." or path:find("^%.%./") or path:find("/%.%./") or path:find("/%.%.$") then
    return true
  end
  if path:sub(1, 1) == "/" then
    return not under(path, root)
  end
  return false
end

local function rm_outside(args, root)
  local recursive, force, targets, options = false, false, {}, true
  for _, a in ipairs(args) do
    if options and a == "--" then
      options = false
    elseif options and a:sub(1, 2) == "--" then
      recursive = recursive or a == "--recursive"
      force = force or a == "--force"
    elseif options and a:sub(1, 1) == "-" and #a > 1 then
      recursive = recursive or a:find("[rR]") ~= nil
      force = force or a:find("f", 2, true) ~= nil
    else
      targets[#targets + 1] = a
    end
  end
  if not (recursive and force) then
    return nil
  end
  for _, t in ipairs(targets) do
    if outside(t, root) then
      return t
    end
  end
  return nil
end

local function forced_push(args)
  local forced, branches = false, {}
  local subcommand = false
  for _, a in ipairs(args) do
    if not subcommand then
      subcommand = a == "push"
    elseif a == "--force" or a == "-f" or a:find("^%-%-force%-") then
      forced = true
    elseif a:sub(1, 1) == "-" and not a:find("^%-%-") and a:find("f", 2, true) then
      forced = true
    elseif a:sub(1, 1) ~= "-" then
      if a:sub(1, 1) == "+" then
        forced = true
        a = a:sub(2)
      end
      branches[#branches + 1] = a:match(":(.*)$") or a
    end
  end
  if not (subcommand and forced) then
    return nil
  end
  -- The first word after `push` is the remote (when there is more than one).
  if #branches <= 1 then
    return "unnamed"
  end
  for i = 2, #branches do
    local b = branches[i]:gsub("^refs/heads/", "")
    if b == "main" or b == "master" then
      return b
    end
  end
  return nil
end

local function fetches(words)
  local p = program(words)
  return p == "curl" or p == "wget"
end

-- Refusals are counted per session: another conversation of the same user starts at zero.
local function count_denial(reason)
  set_state("denials", context.session_state.get("denials", 0) + 1, "session")
  return deny(reason)
end

local function shell(line)
  local root = context.project.root
  local commands = split(line)
  for k, c in ipairs(commands) do
    local p, first = program(c.words)
    local args = {}
    for i = first, #c.words do
      args[#args + 1] = c.words[i]
    end
    if p == "rm" then
      local t = rm_outside(args, root)
      if t then
        return count_denial("`rm` recursive and forced on `" .. t .. "`, outside the project: remove files inside the project only, and name them")
      end
    elseif p == "git" then
      local b = forced_push(args)
      if b == "unnamed" then
        return ask("a forced push without a branch named pushes the current branch: check it is not main or master")
      elseif b then
        return count_denial("a forced push to `" .. b .. "` rewrites shared history: push to a branch of your own and open a pull request")
      end
    elseif SHELLS[p or ""] and c.sep == "|" and commands[k - 1] and fetches(commands[k - 1].words) then
      return count_denial("a script downloaded and piped into a shell runs unreviewed code: download it, read it, then run it")
    end
  end
  -- `bash <(curl ...)`, `sh -c "$(curl ...)"`, `source <(wget ...)`.
  local flat = line:gsub("[\"']", "")
  for _, open in ipairs({ "<%(", "%$%(" }) do
    for _, fetch in ipairs({ "curl", "wget" }) do
      if flat:find(open .. " *" .. fetch) then
        for _, c in ipairs(commands) do
          local p = program(c.words)
          if SHELLS[p or ""] or p == "source" or p == "." then
            return count_denial("a script downloaded and substituted into a shell runs unreviewed code: download it, read it, then run it")
          end
        end
      end
    end
  end
  return false
end

local function write(path)
  if type(path) ~= "string" then
    return false
  end
  if outside(path, context.project.root) or (context.project.root == "" and path:sub(1, 1) == "/") then
    return ask("this writes `" .. path .. "`, outside the project folder: is that what you want?")
  end
  return false
end

local args = tool.arguments
if type(args) ~= "table" then
  return false
end
if args.command ~= nil then
  if type(args.command) ~= "string" then
    return false
  end
  return shell(args.command)
end
return write(args.file_path or args.path or args.notebook_path)
