-- Reads plugin state first: the tick then holds the database's lock while the guard runs.
local _ = context.state.get("slow_started")
set_state("slow_started", true)
local t = os.clock()
while os.clock() - t < 4 do end
return false
