-- Notes the first tool that completes, then waits five turns: it is halted before.
notify('watching')
local ev = wait_for('on_tool_complete')
notify('saw ' .. ev.tool_name)
wait_turns(5)
return true
