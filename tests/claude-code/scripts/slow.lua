set_state("slow_started", true)
local t = os.clock()
while os.clock() - t < 4 do end
return false
