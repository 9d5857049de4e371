queries = (queries or 0) + 1
local roll = math.random(1, 100)
notify("query " .. queries .. " roll " .. roll)
wait_for("on_tool_complete", { tool = "search" })
notify("search done at turn " .. context.turn.number)
wait_turns(2)
set_state("workflow_done", context.turn.number, "session")
return math.random(1, 2) == 1
