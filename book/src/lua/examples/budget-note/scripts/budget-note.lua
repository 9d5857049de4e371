-- Notes the turn at which the token budget passed 60%, every turn it is above it.
if context.turn.token_usage < 0.6 then
  return false
end
set_state("noted_at", context.turn.number)
log("budget noted at turn " .. context.turn.number)
return true
