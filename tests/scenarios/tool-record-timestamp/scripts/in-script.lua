local tools = context.history.tools
local last = tools[#tools]
if last.timestamp ~= last.time then
  error("timestamp " .. tostring(last.timestamp) .. " is not time " .. tostring(last.time))
end
log(string.format("%s completed at %d", last.name, last.timestamp))
return false
