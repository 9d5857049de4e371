-- Waits for the next tick of its trigger, then returns true.
coroutine.yield()
return true
