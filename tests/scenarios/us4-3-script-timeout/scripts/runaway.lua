notify("this notification is discarded with the run")
local n = 0
while true do
  -- Even catching errors does not get a script past its limit.
  pcall(function() n = n + 1 end)
end
