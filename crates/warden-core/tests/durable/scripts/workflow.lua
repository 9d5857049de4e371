queries = (queries or 0) + 1
local roll = math.random(1, 100)
notify("query " .. queries .. " roll " .. roll)
local ev = wait_for("on_tool_complete", { tool = "search" })
local seen = {}
for name, n in pairs(context.history.calls) do seen[#seen + 1] = name .. "=" .. n end
notify("search done at turn " .. context.turn.number .. ": " .. table.concat(seen, " "))
wait_turns(2)
set_state("workflow_done", context.turn.number)
return math.random(1, 2) == 1
