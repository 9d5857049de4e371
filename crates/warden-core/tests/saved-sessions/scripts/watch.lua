local called = tool.name
wait_for("on_tool_complete")
notify("watched " .. called .. " complete", { deliver_at = "immediate" })
return true
