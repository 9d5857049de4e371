-- scripts/research-workflow.lua
--
-- A multi-turn research workflow, written as straight-line code. When the user asks for
-- research, it guides the agent one step at a time, across turns:
--   1. nudge it toward the vault before it answers;
--   2. when vault_search returns, and there are more than six results, ask for a summary;
--   3. two turns later, check that a summary was written;
--   4. before the final answer, ask for citations.
--
-- Use it as the condition of a rule on on_query_start:
--
--   [condition]
--   script = "scripts/research-workflow.lua"

local function is_research()
  for _, word in ipairs({ "research", "compare", "investigate", "survey" }) do
    if query_mentions(word) then
      return true
    end
  end
  return false
end

if not is_research() then
  return false
end

notify("This is a research question: search the vault (vault_search) before answering.",
  { category = "hint", deliver_at = "turn_start" })

-- Step 2: wait for the vault search to come back.
wait_for("on_tool_complete", { tool = "vault_search" })
local count = result.count or 0

if count > 6 then
  notify(count .. " notes found: summarize the key findings before reading further.",
    { category = "hint", deliver_at = "immediate" })
  set_state("research.summary_requested_at_turn", context.turn.number)

  -- Step 3: two turns later, look for the summary in the agent's messages.
  wait_turns(2)
  local summarized = false
  for _, message in ipairs(context.history.messages) do
    if message.role == "assistant" and message.content:lower():find("summary", 1, true) then
      summarized = true
    end
  end
  if not summarized then
    notify("Two turns on, the search results are still not summarized. Write the summary now.",
      { category = "warning", priority = "high", deliver_at = "immediate" })
  end
end

-- Step 4: before the final answer.
notify("Cite the notes you used, by title, in your answer.", { category = "hint", deliver_at = "turn_end" })
return true
