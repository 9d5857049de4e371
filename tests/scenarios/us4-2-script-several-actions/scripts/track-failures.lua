local name = tool.name
local total = (context.state.get("failures_total") or 0) + 1
set_state("failures_total", total)
set_state("last_failure", { tool = name, error = event.error, turn = context.turn.number })
log(name .. " failed: " .. event.error, "warning")
if failure_count(name) >= 2 then
  notify(name .. " keeps failing (" .. failure_count(name) .. " times); try another tool.",
    { priority = "high", category = "warning", deliver_at = "immediate" })
  emit_event("tool.unreliable", { tool = name, failures = failure_count(name) })
end
