-- True when the vault was searched three times or more in the last four tool calls, and the
-- latest search still found little: a sign of flailing.
local tools = context.history.tools
local recent, searches = 0, 0
for i = #tools, math.max(1, #tools - 3), -1 do
  recent = recent + 1
  if tools[i].name == "vault_search" then
    searches = searches + 1
  end
end
return searches >= 3 and (result.count or 0) < 3
