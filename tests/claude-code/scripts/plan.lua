notify("Plan first: reproduce the failure, fix it, then run the tests.", { deliver_at = "immediate" })
wait_turns(2)
notify("Two turns in: run the tests before you change anything else.", { deliver_at = "immediate", priority = "high" })
return true
