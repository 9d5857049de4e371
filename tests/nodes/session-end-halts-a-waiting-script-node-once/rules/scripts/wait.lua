-- Waits five turns: the session ends before.
wait_turns(5)
return true
