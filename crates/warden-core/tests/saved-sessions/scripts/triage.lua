-- Waits for the next turn's start (the hook of its own tree), then holds the group when the
-- tokens are past half.
notify("triage waits from turn " .. context.turn.number, { deliver_at = "immediate" })
wait_for("on_turn_start")
return context.turn.token_usage > 0.5
