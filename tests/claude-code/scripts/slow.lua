-- Reads plugin state first: the tick then holds the database's lock while the guard runs, which
-- it does until its process is killed (the test gives it a time limit it never reaches).
local _ = context.state.get("slow_started")
set_state("slow_started", true)
while true do end
